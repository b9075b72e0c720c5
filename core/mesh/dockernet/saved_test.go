package dockernet

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSavedIsolationRoundTripAndFields(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, SavedFile)
	iso := Isolation{Cluster: netip.MustParsePrefix("10.210.0.0/16"),
		Networks: map[string][]netip.Addr{"a": addrs("10.210.1.2"), "b": addrs("10.210.1.3", "10.210.2.2")}, Open: addrs("10.210.1.9")}
	subnet := netip.MustParsePrefix("10.210.1.0/24")
	if err := SaveIsolation(p, subnet, iso); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("saved file mode %v, %v; want 0600", fi.Mode(), err)
	}
	back, gotSubnet, err := LoadIsolation(p)
	if err != nil || back.Key() != iso.Key() || gotSubnet != subnet {
		t.Errorf("loaded %s %v, %v; want %s %v", back.Key(), gotSubnet, err, iso.Key(), subnet)
	}
	for _, c := range []struct{ body, field string }{
		{`{"cluster":"10.210.0.0/16","subnet":"nope","networks":{}}`, `field "subnet"`},
		{`{"cluster":"x","networks":{}}`, `field "cluster"`},
		{`{"cluster":"10.210.0.0/16","networks":{"a":["10.1"]}}`, `field "networks.a"`},
		{`{"cluster":"10.210.0.0/16","networks":{},"open":["?"]}`, `field "open"`},
	} {
		os.WriteFile(p, []byte(c.body), 0o600)
		if _, _, err := LoadIsolation(p); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want an error naming %s", c.body, err, c.field)
		}
	}
	// A file of a ployzd before the boot restore: no subnet, nothing done.
	os.WriteFile(p, []byte(`{"cluster":"10.210.0.0/16","networks":{"a":["10.210.1.2"]}}`), 0o600)
	if err := RestoreSaved(Config{ChainPrefix: "PZNONE"}, p); !errors.Is(err, ErrNoSavedSubnet) {
		t.Errorf("restore from an old file: %v, want ErrNoSavedSubnet", err)
	}
}

func TestEnsureBootDropIn(t *testing.T) {
	dir := t.TempDir()
	changed, err := EnsureBootDropIn(dir)
	if err != nil || !changed {
		t.Fatalf("first write: changed %v, %v", changed, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "docker.service.d", "ployz-isolation.conf"))
	if err != nil || !strings.Contains(string(b), "ExecStartPre=-/usr/local/bin/ployzd isolation restore\n") {
		t.Fatalf("drop-in %q, %v", b, err)
	}
	if changed, err := EnsureBootDropIn(dir); err != nil || changed {
		t.Errorf("second write: changed %v, %v; want untouched", changed, err)
	}
}
