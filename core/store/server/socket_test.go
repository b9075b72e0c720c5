package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/asnobody"
	"github.com/ployz/ployz/internal/prereq"
)

// TestAsNobodyHelper is the unprivileged side of the tests below, run by
// asnobody.Command as nobody; in an ordinary run it does nothing.
func TestAsNobodyHelper(t *testing.T) {
	asnobody.Helper(t, map[string]func(*testing.T){"dial": func(*testing.T) {
		for _, path := range asnobody.Args() {
			fmt.Printf("%s: %s\n", path, tryUnix(path))
		}
	}})
}

// tryUnix sends one HTTP request (the API) or one admin Ping frame down
// a unix socket, as any local program could, and says what came back.
func tryUnix(path string) string {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return "dial error: " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if strings.HasSuffix(path, "admin.sock") {
		err = WriteFrame(c, "Ping")
	} else {
		_, err = io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: store\r\n\r\n")
	}
	if err != nil {
		return fmt.Sprintf("no answer (the write failed: %v)", err) // hung up already
	}
	b, err := io.ReadAll(c)
	if len(b) > 0 {
		return fmt.Sprintf("answered %q", b)
	}
	return fmt.Sprintf("no answer (%v)", err)
}

// TestSocketsRefuseForeignUID: a process of another user that reaches the
// API or admin socket (here by loosening their modes, so the peer check
// is all that stands) is hung up on unanswered, while root is served.
func TestSocketsRefuseForeignUID(t *testing.T) {
	prereq.Root(t, "to connect as another user")
	dir, err := os.MkdirTemp("", "ployz-socket-") // t.TempDir's parent is root's alone
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	apiSock, adminSock := filepath.Join(dir, "run", "api.sock"), filepath.Join(dir, "run", "admin.sock")
	// The database in a directory of its own: the store makes that 0700.
	n, err := Start(context.Background(), Config{DBPath: filepath.Join(dir, "db", "store.db"), SchemaSQL: testSchemaSQL,
		APISocket: apiSock, AdminPath: adminSock})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := tryUnix(apiSock); !strings.Contains(got, "200 OK") {
		t.Fatalf("root on the API socket: %s", got)
	}
	if got := adminCall(t, adminSock, "Ping"); len(got) != 1 || string(got[0]) != `"Success"` {
		t.Fatalf("root on the admin socket: %s", got)
	}
	for path, mode := range map[string]os.FileMode{filepath.Dir(apiSock): 0o755, apiSock: 0o666, adminSock: 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	out, err := asnobody.Command(t, "TestAsNobodyHelper", "dial", apiSock, adminSock).Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for _, path := range []string{apiSock, adminSock} {
		line := ""
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, path+": ") {
				line = l
			}
		}
		if !strings.Contains(line, "no answer") {
			t.Fatalf("nobody on %s: %q; want no answer\n%s", path, line, out)
		}
	}
}

// TestAPISocketIsTokenless and the TCP API still wants its token.
func TestAPISocketIsTokenless(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sock := filepath.Join(dir, "run", "api.sock")
	n, err := Start(context.Background(), Config{DBPath: filepath.Join(dir, "store.db"), SchemaSQL: testSchemaSQL,
		APIAddr: addr, Token: "tok", APISocket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := tryUnix(sock); !strings.Contains(got, "200 OK") {
		t.Fatalf("socket without a token: %s", got)
	}
	resp, err := http.Get("http://" + addr + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("TCP without a token: HTTP %d", resp.StatusCode)
	}
}

// TestRotateTokenFile: every start mints a new token, owner-only.
func TestRotateTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	a, err := RotateTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RotateTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	got, _ := ReadTokenFile(path)
	if a == b || len(b) != 64 || got != b || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens %q then %q, file holds %q mode %v", a, b, got, fi.Mode())
	}
}
