package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// fakeServer is an SSH server standing in for a bare arm64 Debian host:
// it answers the commands an install runs from an in-memory file system
// and serves a Docker API on the forwarded Docker socket. Any other
// command fails and is recorded, so the test sees what it does not know.
type fakeServer struct {
	uname string // what `uname -s; uname -m; os-release` prints

	mu      sync.Mutex
	files   map[string][]byte
	active  bool
	unknown []string
}

var (
	catTmp = regexp.MustCompile(`^cat > (\S+)\.tmp && chmod 0755 \S+ && mv \S+ \S+$`)
	catTo  = regexp.MustCompile(`^cat > (\S+)$`)
)

// exec runs one command line, returning its output and exit status.
func (f *fakeServer) exec(cmd string, stdin []byte) (string, uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case strings.HasPrefix(cmd, "uname -s; uname -m;"):
		return f.uname, 0
	case strings.HasPrefix(cmd, "command -v dockerd"):
		return "/usr/sbin/dockerd\n", 0
	case strings.HasPrefix(cmd, "test -S /var/run/docker.sock"), cmd == "systemctl daemon-reload":
		return "", 0
	case cmd == "test -x /usr/local/bin/ployzd":
		return "", exitIf(f.files["/usr/local/bin/ployzd"] == nil)
	case catTmp.MatchString(cmd):
		f.files[catTmp.FindStringSubmatch(cmd)[1]] = stdin
		return "", 0
	case catTo.MatchString(cmd):
		f.files[catTo.FindStringSubmatch(cmd)[1]] = stdin
		return "", 0
	case cmd == "systemctl is-active ployz.service":
		if f.active {
			return "active\n", 0
		}
		return "inactive\n", 3
	case cmd == "systemctl enable --now ployz.service":
		f.active = f.files["/etc/systemd/system/ployz.service"] != nil && f.files["/usr/local/bin/ployzd"] != nil
		return "", exitIf(!f.active)
	case cmd == "test -S /run/ployz/ployz.sock":
		return "", exitIf(!f.active)
	}
	f.unknown = append(f.unknown, cmd)
	return "fake host: unknown command\n", 127
}

func exitIf(fail bool) uint32 {
	if fail {
		return 1
	}
	return 0
}

// serve accepts SSH connections on l until it closes.
func (f *fakeServer) serve(t *testing.T, l net.Listener) {
	_, hostKey, _ := ed25519.GenerateKey(nil)
	signer, err := ssh.NewSignerFromKey(hostKey)
	if err != nil {
		t.Error(err)
		return
	}
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(signer)
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go f.conn(c, cfg)
	}
}

func (f *fakeServer) conn(c net.Conn, cfg *ssh.ServerConfig) {
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			go f.session(nc)
		case "direct-streamlocal@openssh.com":
			go f.docker(nc)
		default:
			nc.Reject(ssh.UnknownChannelType, nc.ChannelType())
		}
	}
}

// session answers one exec request, reading stdin to its end first.
func (f *fakeServer) session(nc ssh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			req.Reply(false, nil)
			continue
		}
		var p struct{ Command string }
		ssh.Unmarshal(req.Payload, &p)
		req.Reply(true, nil)
		var stdin []byte
		if strings.HasPrefix(p.Command, "cat > ") {
			stdin, _ = io.ReadAll(ch)
		}
		out, code := f.exec(p.Command, stdin)
		io.WriteString(ch, out)
		status := make([]byte, 4)
		binary.BigEndian.PutUint32(status, code)
		ch.SendRequest("exit-status", false, status)
		return
	}
}

// docker serves a Docker Engine's version on a forwarded socket.
func (f *fakeServer) docker(nc ssh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.45")
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/version") {
			fmt.Fprint(w, `{"Version":"26.1.5","ApiVersion":"1.45","Os":"linux","Arch":"arm64"}`)
		}
	})}
	srv.Serve(&oneConn{c: channelConn{ch}}) // ends when the channel closes
}

// TestInstallArm64ServerOverSSH runs the install an operator's CLI does on
// any computer (a macOS or amd64 laptop; the code path has nothing of the
// laptop's platform) against a fake arm64 Debian host over real SSH: the
// server's platform is detected, the channel's linux/arm64 bundle and CLI
// are verified and uploaded, the units written, ployz.service started.
func TestInstallArm64ServerOverSSH(t *testing.T) {
	rc, _ := arm64Channel(t)
	host := &fakeServer{uname: "Linux\naarch64\nID=debian\nVERSION_ID=\"13\"\n", files: map[string][]byte{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go host.serve(t, l)
	sc, err := ssh.Dial("tcp", l.Addr().String(), &ssh.ClientConfig{User: "root", HostKeyCallback: ssh.InsecureIgnoreHostKey()}) // a test's own server
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var lines []string
	e := Enrollment{Channel: &rc}
	e.Options.Progress = func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }
	if err := installOver(context.Background(), sc, e); err != nil {
		t.Fatalf("install: %v\nprogress: %q\nunknown commands: %q", err, lines, host.unknown)
	}
	host.mu.Lock()
	defer host.mu.Unlock()
	for path, want := range map[string]string{"/usr/local/bin/ployzd": "arm64 daemon", "/usr/local/bin/ployz": "arm64 cli"} {
		if got := host.files[path]; !bytes.Equal(got, []byte(want)) {
			t.Errorf("%s on the server: %q, want %q", path, got, want)
		}
	}
	if host.files["/etc/systemd/system/ployz.service"] == nil || !host.active {
		t.Errorf("ployz.service written %v, started %v", host.files["/etc/systemd/system/ployz.service"] != nil, host.active)
	}
	if len(host.unknown) > 0 {
		t.Errorf("commands the fake host did not know: %q", host.unknown)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "linux/arm64") {
		t.Errorf("progress does not name the server's platform: %q", lines)
	}

	// An unsupported server is refused before anything is written.
	bare := &fakeServer{uname: "Linux\nriscv64\nID=debian\nVERSION_ID=\"13\"\n", files: map[string][]byte{}}
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	defer l2.Close()
	go bare.serve(t, l2)
	sc2, err := ssh.Dial("tcp", l2.Addr().String(), &ssh.ClientConfig{User: "root", HostKeyCallback: ssh.InsecureIgnoreHostKey()}) // a test's own server
	if err != nil {
		t.Fatal(err)
	}
	defer sc2.Close()
	if err := installOver(context.Background(), sc2, Enrollment{Channel: &rc}); err == nil || !strings.Contains(err.Error(), "riscv64") {
		t.Errorf("riscv64 server: %v, want a refusal naming it", err)
	}
	if len(bare.files) > 0 || bare.active {
		t.Errorf("a refused server was written to: %v", bare.files)
	}
}

// channelConn is an SSH channel as a net.Conn for http.Server.
type channelConn struct{ ssh.Channel }

func (channelConn) LocalAddr() net.Addr              { return &net.UnixAddr{Name: "docker.sock", Net: "unix"} }
func (channelConn) RemoteAddr() net.Addr             { return &net.UnixAddr{Name: "ssh", Net: "unix"} }
func (channelConn) SetDeadline(time.Time) error      { return nil }
func (channelConn) SetReadDeadline(time.Time) error  { return nil }
func (channelConn) SetWriteDeadline(time.Time) error { return nil }

// oneConn is a listener that hands out one connection; the server goes
// on serving it after Accept's error ends its loop.
type oneConn struct {
	c    net.Conn
	once sync.Once
}

func (o *oneConn) Accept() (net.Conn, error) {
	var c net.Conn
	o.once.Do(func() { c = o.c })
	if c == nil {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (o *oneConn) Close() error   { return nil }
func (o *oneConn) Addr() net.Addr { return o.c.LocalAddr() }
