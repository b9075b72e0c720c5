// Package store is the core's client for the replicated store: it speaks
// Corrosion's HTTP API subset, so it works against Ployz's own store server
// (package server) or a real Corrosion agent alike.
package store

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"golang.org/x/net/http2"
)

// Client talks to one store API endpoint.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer <token>" on every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithH2C speaks HTTP/2 without TLS (prior knowledge), like Uncloud's
// client; the default is HTTP/1.1 keep-alive, which upstream Corrosion serves.
func WithH2C() Option {
	return func(c *Client) {
		c.hc = &http.Client{Transport: &http2.Transport{
			AllowHTTP: true,
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		}}
	}
}

// WithHTTPClient replaces the HTTP client.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client for addr ("host:port" or an http:// URL).
func New(addr string, opts ...Option) *Client {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	c := &Client{base: strings.TrimRight(addr, "/"), hc: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c
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
