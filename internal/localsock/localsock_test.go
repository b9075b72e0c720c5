package localsock

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ployz/ployz/internal/prereq"
)

// TestLoopbackOwnerFindsTheListenersUID over IPv4, IPv6 and a dual-stack
// listener reached over IPv4 (its sockets show in tcp6 as v4-mapped).
func TestLoopbackOwnerFindsTheListenersUID(t *testing.T) {
	if runtime.GOOS != "linux" {
		prereq.Missing(t, "Linux (/proc/net/tcp)", errors.New("running on "+runtime.GOOS))
	}
	for _, c := range []struct{ listen, dial string }{
		{"tcp4", "127.0.0.1"}, {"tcp6", "[::1]"}, {"tcp", "127.0.0.1"},
	} {
		ln, err := net.Listen(c.listen, net.JoinHostPort(strings.Trim(c.dial, "[]"), "0"))
		if c.listen == "tcp" {
			ln, err = net.Listen("tcp", ":0")
		}
		if err != nil {
			prereq.Missing(t, c.listen+" on loopback", err)
		}
		defer ln.Close()
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		conn, err := net.Dial("tcp", c.dial+":"+port)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		uid, err := LoopbackOwner(conn)
		if err != nil || uid != uint32(os.Getuid()) {
			t.Fatalf("%s listener, dialed at %s: uid %d, %v; want %d", c.listen, c.dial, uid, err, os.Getuid())
		}
	}
}

// TestDialRefusesWhatIsNotASocket, and a socket outside a 0700 directory.
func TestDialRefusesWhatIsNotASocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	ln, err := Listen(filepath.Join(dir, "api.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	c, err := Dial(ctx, filepath.Join(dir, "api.sock"))
	if err != nil {
		t.Fatalf("a good socket: %v", err)
	}
	c.Close()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(ctx, filepath.Join(dir, "file")); err == nil || !strings.Contains(err.Error(), "not a unix socket") {
		t.Fatalf("a plain file: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(ctx, filepath.Join(link, "api.sock")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("a socket through a symlinked directory: %v", err)
	}
}
