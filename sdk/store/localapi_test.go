package store

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/storetest"
	"github.com/ployz/ployz/internal/asnobody"
)

// TestAsNobodyHelper is the unprivileged side of the tests below, run by
// asnobody.Command as nobody; in an ordinary run it does nothing.
func TestAsNobodyHelper(t *testing.T) {
	asnobody.Helper(t, map[string]func(*testing.T){"impostor": impostor})
}

// impostor is a local user standing in for a store that is down: it binds
// a free loopback port, prints it, prints every Authorization header it is
// sent and answers every query with a forged row.
func impostor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("port %d\n", ln.Addr().(*net.TCPAddr).Port)
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("authorization %q\n", r.Header.Get("Authorization"))
		fmt.Fprintln(w, `{"columns":["id","owner","body","updated_at"]}`)
		fmt.Fprintln(w, `{"row":[1,["forged","m1","{}",0]]}`)
		fmt.Fprintln(w, `{"eoq":{"time":0.001}}`)
	}))
}

// TestTokenNotSentToAnotherUsersListener: a user other than root holding
// the store's loopback port while the store is down gets no token from a
// client, and the client takes no rows from it.
func TestTokenNotSentToAnotherUsersListener(t *testing.T) {
	cmd := asnobody.Command(t, "TestAsNobodyHelper", "impostor")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) // killed on purpose
	lines := bufio.NewScanner(out)
	var port int
	for port == 0 && lines.Scan() {
		fmt.Sscanf(lines.Text(), "port %d", &port) // other lines are the test runner's
	}
	if port == 0 {
		t.Fatal("the impostor printed no port")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := New(fmt.Sprintf("127.0.0.1:%d", port), WithToken("sekrit-token"))
	rows, err := c.Containers().List(ctx)
	if err == nil || !strings.Contains(err.Error(), "refusing to send the store token") {
		t.Fatalf("List from an impostor = %v, %v; want a refusal", rows, err)
	}
	if len(rows) != 0 {
		t.Fatalf("took rows from an impostor: %+v", rows)
	}
	cmd.Process.Kill() // ends its output
	var heard []string
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "authorization") {
			heard = append(heard, lines.Text())
		}
	}
	if len(heard) != 0 {
		t.Fatalf("the impostor was sent requests: %q", heard)
	}
}

// startSocketServer runs a store serving its API on a unix socket only.
func startSocketServer(t *testing.T) (sock string) {
	t.Helper()
	return storetest.Start(t, storetest.Socket(filepath.Join(t.TempDir(), "run", "api.sock"))).API()
}

// TestSocketClientNeedsNoToken: the socket serves the same API without a
// token, over HTTP/1.1 and h2c, and the directory is made 0700.
func TestSocketClientNeedsNoToken(t *testing.T) {
	sock := startSocketServer(t)
	fi, err := os.Stat(filepath.Dir(sock))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	ctx := context.Background()
	for _, c := range []*Client{New(sock), New("unix://"+sock, WithH2C())} {
		if _, err := c.Machines().Put(ctx, Row[MachineBody]{Key: "m1", Owner: "m1", Body: MachineBody{Name: "one"}}); err != nil {
			t.Fatal(err)
		}
		if rows, err := c.Machines().List(ctx); err != nil || len(rows) != 1 {
			t.Fatalf("List over the socket = %v, %v", rows, err)
		}
	}
}

// TestSocketClientRefusesLooseDirectory: a socket in a directory others
// can write to (or enter), or owned by another user, could be anyone's;
// the client refuses it before it connects.
func TestSocketClientRefusesLooseDirectory(t *testing.T) {
	sock := startSocketServer(t)
	dir := filepath.Dir(sock)
	ctx := context.Background()
	for _, mode := range []os.FileMode{0o777, 0o1777, 0o755} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := New(sock).Health(ctx); err == nil || !strings.Contains(err.Error(), "only its owner may have access") {
			t.Fatalf("socket in a %04o directory: %v; want a refusal", mode, err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := New(sock).Health(ctx); err != nil {
		t.Fatalf("socket in a 0700 directory: %v", err)
	}
	if os.Geteuid() != 0 {
		return // only root can give the directory away
	}
	uid, gid := asnobody.UID(t)
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(sock).Health(ctx); err == nil || !strings.Contains(err.Error(), "is owned by uid") {
		t.Fatalf("socket in nobody's directory: %v; want a refusal", err)
	}
}
