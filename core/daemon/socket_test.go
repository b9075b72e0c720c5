package daemon

import (
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ployz/ployz/internal/prereq"
)

// TestSocketIsRootOnly: the socket replaces a stale file, answers at its
// final path and leaves nothing behind; it is 0600, or 0660 on a host
// with the ployz group (shareSocket's own test covers both cases).
func TestSocketIsRootOnly(t *testing.T) {
	want := os.FileMode(0o600)
	if _, err := user.LookupGroup(SocketGroup); err == nil {
		want = 0o660
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
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != want {
		t.Fatalf("socket mode = %v, %v; want a %v socket", fi.Mode(), err, want)
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

// TestSocketSharedWithGroup: with the group the socket becomes 0660,
// without it stays as it was (root-only).
func TestSocketSharedWithGroup(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		prereq.Missing(t, "a group entry for this process's gid", err)
	}
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := shareSocket(path, "ployz-no-such-group-here"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode without the group = %v; want 0600", fi.Mode().Perm())
	}
	if err := shareSocket(path, g.Name); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o660 {
		t.Fatalf("mode with group %s = %v; want 0660", g.Name, fi.Mode().Perm())
	}
}
