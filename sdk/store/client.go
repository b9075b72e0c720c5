package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/ployz/ployz/internal/localsock"
)

// Client talks to one store API endpoint: a unix socket (Ployz's own
// store on this Machine) or TCP (a Corrosion agent, or a store serving TCP
// for outside clients).
type Client struct {
	base   string
	token  string
	socket string // unix socket path; "" for TCP
	hc     *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer <token>" on every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithH2C speaks HTTP/2 without TLS (prior knowledge), like Uncloud's
// client; the default is HTTP/1.1 keep-alive, which upstream Corrosion serves.
func WithH2C() Option {
	return func(c *Client) {
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		c.hc = &http.Client{Transport: &http.Transport{Protocols: &protocols, DialContext: c.dial}}
	}
}

// WithHTTPClient replaces the HTTP client.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client for addr: "host:port" or an http:// URL for TCP,
// an absolute path or a unix:// URL for a unix socket. A socket is used
// only when localsock.Dial accepts it (a 0700 directory, owned and served
// by root or this process's uid). Over TCP to a loopback address a token
// is sent only to a listener owned by root or this process's uid.
func New(addr string, opts ...Option) *Client {
	c := &Client{}
	if path, ok := SocketPath(addr); ok {
		c.socket, c.base = path, "http://store"
	} else {
		if !strings.Contains(addr, "://") {
			addr = "http://" + addr
		}
		c.base = strings.TrimRight(addr, "/")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a proxy would carry the token off the Machine
	tr.DialContext = c.dial
	c.hc = &http.Client{Transport: tr}
	for _, o := range opts {
		o(c)
	}
	return c
}

// SocketPath reports whether addr names a unix socket (an absolute path or
// a unix:// URL) and returns its path.
func SocketPath(addr string) (string, bool) {
	if p, ok := strings.CutPrefix(addr, "unix://"); ok {
		return p, true
	}
	return addr, strings.HasPrefix(addr, "/")
}

// dial connects to the client's socket, or over TCP; see New for what each
// checks before a request (and its token) is written.
func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.socket != "" {
		return localsock.Dial(ctx, c.socket)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil || c.token == "" {
		return conn, err
	}
	if err := checkTokenPeer(conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// checkTokenPeer refuses a loopback listener owned by another local user:
// any user can bind the store's port while the store is down, and would
// otherwise be handed the token and believed.
func checkTokenPeer(conn net.Conn) error {
	ra, ok := conn.RemoteAddr().(*net.TCPAddr)
	if !ok || !ra.IP.IsLoopback() {
		return nil // another host: no local user can stand in for it
	}
	uid, err := localsock.LoopbackOwner(conn)
	if err != nil {
		return fmt.Errorf("refusing to send the store token to %s: %w", ra, err)
	}
	if !localsock.Trusted(uid) {
		return fmt.Errorf("refusing to send the store token to %s: its listener belongs to uid %d, not root or uid %d", ra, uid, os.Getuid())
	}
	return nil
}

// Statement is one SQL statement with positional or named parameters. It is
// sent in Corrosion's verbose object form.
type Statement struct {
	Query  string         `json:"query"`
	Params []any          `json:"params,omitempty"`
	Named  map[string]any `json:"named_params,omitempty"`
}

// Stmt builds a statement with positional parameters.
func Stmt(query string, params ...any) Statement { return Statement{Query: query, Params: params} }

// APIError is a non-2xx answer from the store.
type APIError struct {
	Status int
	Msg    string
}

// Error formats the status and the server's message.
func (e *APIError) Error() string { return fmt.Sprintf("store API: HTTP %d: %s", e.Status, e.Msg) }

func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request for %s: %w", path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w", path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("store API %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer closeBody(resp.Body)
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// readAPIError extracts the message from {"error":..} or from the
// transaction envelope's first failed result.
func readAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var v struct {
		Error   string `json:"error"`
		Results []struct {
			Error string `json:"error"`
		} `json:"results"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &v) == nil {
		if v.Error != "" {
			msg = v.Error
		}
		for _, r := range v.Results {
			if r.Error != "" {
				msg = r.Error
			}
		}
	}
	return &APIError{Status: resp.StatusCode, Msg: msg}
}

// closeBody reads what is left of a small answer (the newline after the
// last JSON value, typically) before closing it: a body closed before EOF
// makes net/http drop the connection, so every request would dial anew.
func closeBody(b io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(b, 64<<10))
	_ = b.Close()
}
