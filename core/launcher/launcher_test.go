package launcher

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// serveOnce answers the first connection on path with msg and, when
// pass is set, the listener's socket.
func serveOnce(t *testing.T, path, msg string, pass *net.TCPListener) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		var oob []byte
		if pass != nil {
			f, _ := pass.File()
			defer f.Close()
			oob = unix.UnixRights(int(f.Fd()))
		}
		c.WriteMsgUnix([]byte(msg), oob, nil) // the test reads it
	}()
}

// TestReceive: the socket and its name arrive, once the activation socket
// appears (the launcher waits for a daemon that is starting); a refusal
// comes back as an error naming it, with nothing received.
func TestReceive(t *testing.T) {
	dir := t.TempDir()
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	path := filepath.Join(dir, "ok.sock")
	time.AfterFunc(300*time.Millisecond, func() { serveOnce(t, path, ReplyOK+"tcp-8080", tcp) })
	fd, name, err := Receive(path, 5*time.Second)
	if err != nil || name != "tcp-8080" {
		t.Fatalf("Receive: %d %q %v", fd, name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	l, err := net.FileListener(f)
	f.Close()
	if err != nil || l.Addr().String() != tcp.Addr().String() {
		t.Fatalf("received %v (%v), want the listener on %s", l, err, tcp.Addr())
	}
	l.Close()

	bad := filepath.Join(dir, "bad.sock")
	serveOnce(t, bad, ReplyErr+"not inside the Container", nil)
	if _, _, err := Receive(bad, time.Second); err == nil || !strings.Contains(err.Error(), "refused by the Machine: not inside the Container") {
		t.Fatalf("refusal: %v", err)
	}
	if _, _, err := Receive(filepath.Join(dir, "none.sock"), 300*time.Millisecond); err == nil {
		t.Fatal("no socket: no error")
	}
}
