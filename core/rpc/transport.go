package rpc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// DefaultSocket is where ployzd serves Machine RPC locally.
const DefaultSocket = "/run/ployz/ployz.sock"

// DialURL returns a Client for a connection URL:
//
//	unix:///run/ployz/ployz.sock   the local daemon
//	tcp://[fdcc::...]:7569         a daemon's mesh address
//	ssh://root@host[:22]           over SSH, through `ployzd dial-stdio`
//
// o says how to authenticate ssh:// URLs and check the host's key.
func DialURL(raw string, o SSHOptions) (*Client, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("connection %q: %w", raw, err)
	}
	switch u.Scheme {
	case "unix":
		return DialUnix(u.Path)
	case "tcp":
		return DialTCP(context.Background(), u.Host)
	case "ssh":
		t, err := NewSSHTunnel(u, o)
		if err != nil {
			return nil, err
		}
		c, err := NewClient(t.Dial)
		if err != nil {
			t.Close()
			return nil, err
		}
		c.onClose = t.Close
		return c, nil
	}
	return nil, fmt.Errorf("connection %q: scheme %q is not one of unix, tcp, ssh", raw, u.Scheme)
}

// SSHTunnel runs `ployzd dial-stdio` on a Machine over one SSH connection
// and hands each session's stdin/stdout to gRPC as a net.Conn.
type SSHTunnel struct {
	addr string
	cfg  *ssh.ClientConfig
	mu   sync.Mutex
	c    *ssh.Client
}

// SSHOptions configures ssh:// connections.
type SSHOptions struct {
	// KeyFile is the SSH private key; empty tries ~/.ssh/id_ed25519,
	// id_ecdsa and id_rsa.
	KeyFile string
	// Key is a PEM private key given as material rather than a file (a CI
	// job's secret variable); it wins over KeyFile.
	Key []byte
	// HostKeys pins the Machines' host keys; its Path is required.
	HostKeys HostKeys
}

// NewSSHTunnel prepares (but does not open) an SSH tunnel to u.
func NewSSHTunnel(u *url.URL, o SSHOptions) (*SSHTunnel, error) {
	user := u.User.Username()
	if user == "" {
		user = "root"
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "22")
	}
	signers, err := o.signers()
	if err != nil {
		return nil, err
	}
	return &SSHTunnel{addr: host, cfg: &ssh.ClientConfig{
		User: user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signers...)},
		// Pinned on first use once vouched for (firstcontact.go); a changed
		// key is refused (hostkeys.go).
		HostKeyCallback: o.HostKeys.Callback(),
		Timeout:         20 * time.Second,
	}}, nil
}

// Client returns the tunnel's SSH connection, opening it on first use.
func (t *SSHTunnel) Client(ctx context.Context) (*ssh.Client, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c != nil {
		return t.c, nil
	}
	d := net.Dialer{Timeout: 20 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", t.addr, err)
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, t.addr, t.cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh %s: %w", t.addr, err)
	}
	t.c = ssh.NewClient(c, chans, reqs)
	return t.c, nil
}

// Dial starts `ployzd dial-stdio` in a new session.
func (t *SSHTunnel) Dial(ctx context.Context) (net.Conn, error) {
	c, err := t.Client(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := c.NewSession()
	if err != nil {
		return nil, fmt.Errorf("ssh %s: session: %w", t.addr, err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	if err := sess.Start("ployzd dial-stdio"); err != nil {
		sess.Close()
		return nil, fmt.Errorf("ssh %s: ployzd dial-stdio: %w", t.addr, err)
	}
	return &stdioConn{r: stdout, w: stdin, close: sess.Close, addr: t.addr}, nil
}

// Close closes the SSH connection.
func (t *SSHTunnel) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c == nil {
		return nil
	}
	err := t.c.Close()
	t.c = nil
	return err
}

func (o SSHOptions) signers() ([]ssh.Signer, error) {
	if len(o.Key) > 0 {
		s, err := ssh.ParsePrivateKey(o.Key)
		if err != nil {
			return nil, fmt.Errorf("ssh key (given as material, not a file): %w", err)
		}
		return []ssh.Signer{s}, nil
	}
	return loadSigners(o.KeyFile)
}

func loadSigners(keyFile string) ([]ssh.Signer, error) {
	files := []string{keyFile}
	if keyFile == "" {
		home, _ := os.UserHomeDir()
		files = []string{filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(home, ".ssh", "id_ecdsa"), filepath.Join(home, ".ssh", "id_rsa")}
	}
	var signers []ssh.Signer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			if keyFile != "" {
				return nil, fmt.Errorf("ssh key %s: %w", f, err)
			}
			continue
		}
		s, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("ssh key %s: %w", f, err)
		}
		signers = append(signers, s)
	}
	if len(signers) == 0 {
		return nil, fmt.Errorf("no SSH key found (tried %v); pass --ssh-key", files)
	}
	return signers, nil
}

// stdioConn is a net.Conn over a pair of pipes.
type stdioConn struct {
	r     io.Reader
	w     io.WriteCloser
	close func() error
	addr  string
	once  sync.Once
}

func (c *stdioConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *stdioConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c *stdioConn) Close() error {
	var err error
	c.once.Do(func() { c.w.Close(); err = c.close() })
	return err
}
func (c *stdioConn) LocalAddr() net.Addr              { return stdioAddr("local") }
func (c *stdioConn) RemoteAddr() net.Addr             { return stdioAddr(c.addr) }
func (c *stdioConn) SetDeadline(time.Time) error      { return nil }
func (c *stdioConn) SetReadDeadline(time.Time) error  { return nil }
func (c *stdioConn) SetWriteDeadline(time.Time) error { return nil }

type stdioAddr string

func (a stdioAddr) Network() string { return "ssh-stdio" }
func (a stdioAddr) String() string  { return string(a) }

// DialStdio bridges this process's stdin/stdout to the daemon socket, for
// `ployzd dial-stdio` at the far end of an SSH session.
func DialStdio(socket string, stdin io.Reader, stdout io.Writer) error {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return fmt.Errorf("ployzd is not answering on %s: %w", socket, err)
	}
	defer conn.Close()
	done := make(chan error, 2)
	go func() { _, err := io.Copy(conn, stdin); conn.(*net.UnixConn).CloseWrite(); done <- err }()
	go func() { _, err := io.Copy(stdout, conn); done <- err }()
	return <-done
}

// Fingerprint is the SHA256 fingerprint of the first key these options
// offer (the one an operator's records name); "" when none loads.
func (o SSHOptions) Fingerprint() string {
	s, err := o.signers()
	if err != nil || len(s) == 0 {
		return ""
	}
	return ssh.FingerprintSHA256(s[0].PublicKey())
}
