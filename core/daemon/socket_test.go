package daemon

import (
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

func TestSocketIsRootOnly(t *testing.T) {
	if _, err := user.LookupGroup(SocketGroup); err == nil {
		t.Skipf("group %s exists here; the socket would be 0660", SocketGroup)
	}
	path := filepath.Join(t.TempDir(), "run", "ployz.sock")
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, nil, 0o666) // a stale file from a previous run
	l, err := listenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, %v; want a 0600 socket", fi.Mode(), err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the socket does not answer at its final path: %v", err)
	}
	c.Close()
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("left behind in the run directory: %v", ents)
	}
}

func TestSocketSharedWithGroup(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Skip(err)
	}
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := shareSocket(path, g.Name); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o660 {
		t.Fatalf("mode with group %s = %v; want 0660", g.Name, fi.Mode().Perm())
	}
}
