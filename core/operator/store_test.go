package operator

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func open(t *testing.T) (*Store, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "operator.db")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

func TestContexts(t *testing.T) {
	s, _ := open(t)
	if _, err := s.Current(); !errors.Is(err, ErrNoContext) {
		t.Fatalf("no current context: %v", err)
	}
	if err := s.SaveContext(Context{Name: "prod", Connections: []Connection{{URL: "ssh://root@10.0.0.1"}, {URL: "unix:///run/ployz/ployz.sock"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveContext(Context{Name: "lab", Connections: []Connection{{URL: "ftp://x"}}}); err == nil || !strings.Contains(err.Error(), `scheme "ftp"`) {
		t.Fatalf("bad scheme accepted: %v", err)
	}
	if err := s.Use("prod"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddConnection("prod", Connection{URL: "ssh://root@10.0.0.2"}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Current()
	if err != nil || c.Name != "prod" || len(c.Connections) != 3 || c.Connections[2].URL != "ssh://root@10.0.0.2" {
		t.Fatalf("current = %+v, %v", c, err)
	}
	if removed, err := s.RemoveConnection("prod", "ssh://root@10.0.0.2"); err != nil || !removed {
		t.Fatalf("remove a connection: %t, %v", removed, err)
	}
	if removed, err := s.RemoveConnection("prod", "ssh://root@10.0.0.2"); err != nil || removed {
		t.Fatalf("remove it again: %t, %v", removed, err)
	}
	if c, _ := s.Current(); len(c.Connections) != 2 {
		t.Fatalf("after removal: %+v", c)
	}
	if err := s.Use("nope"); err == nil || !strings.Contains(err.Error(), "valid: prod") {
		t.Fatalf("use of an unknown context should list valid ones: %v", err)
	}
	if err := s.RemoveContext("prod"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Current(); err == nil {
		t.Fatal("removed context still current")
	}
}

func TestAllocationResumesAndAvoidsObserved(t *testing.T) {
	s, p := open(t)
	net16 := netip.MustParsePrefix("10.210.0.0/16")
	a, err := s.Allocate("prod", "id-a", "m1", net16, nil)
	if err != nil || a.String() != "10.210.0.0/24" {
		t.Fatalf("first = %v, %v", a, err)
	}
	// Observed subnets and the history both exclude.
	b, err := s.Allocate("prod", "id-b", "m2", net16, []netip.Prefix{netip.MustParsePrefix("10.210.1.0/24")})
	if err != nil || b.String() != "10.210.2.0/24" {
		t.Fatalf("second = %v, %v", b, err)
	}
	// A retry of the same Machine resumes its subnet, even after reopening.
	s.Close()
	s2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	again, err := s2.Allocate("prod", "id-b", "m2", net16, nil)
	if err != nil || again != b {
		t.Fatalf("retry = %v, want %v (%v)", again, b, err)
	}
	if err := s2.SetAllocationState("prod", "id-b", "failed"); err != nil {
		t.Fatal(err)
	}
	h, _ := s2.Allocations("prod")
	if len(h) != 2 || h[1].State != "failed" {
		t.Fatalf("history = %+v", h)
	}
	// A failed allocation is kept: a third Machine does not reuse it.
	c, _ := s2.Allocate("prod", "id-c", "m3", net16, nil)
	if c.String() != "10.210.1.0/24" {
		t.Fatalf("third = %v", c)
	}
}

// The store is the operator's alone, also in a directory that existed
// before (SQLite alone would create it 0644), and so are its WAL files.
func TestStoreFileIsOwnerOnly(t *testing.T) {
	dir := t.TempDir() // exists already, mode 0700 or looser
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "operator.db")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveContext(Context{Name: "lab", Connections: []Connection{{URL: "unix:///run/ployz/ployz.sock"}}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{p, p + "-wal", p + "-shm"} {
		if fi, err := os.Stat(f); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", f, fi.Mode().Perm())
		}
	}
	s.Close()
	// One made loose by hand is narrowed on the next open.
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(p)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("reopened store is %v, want 0600", fi.Mode().Perm())
	}
}
