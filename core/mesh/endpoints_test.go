package mesh

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestEndpointMemoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "endpoints.json")
	m, err := LoadEndpointMemory(path)
	if err != nil || len(m) != 0 {
		t.Fatalf("missing file: %v, %v", m, err)
	}
	m["peerA"] = netip.MustParseAddrPort("192.0.2.1:51820")
	m["peerB"] = netip.MustParseAddrPort("[2001:db8::1]:51820")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, %v", fi.Mode(), err)
	}
	got, err := LoadEndpointMemory(path)
	if err != nil || len(got) != 2 || got["peerB"] != m["peerB"] {
		t.Fatalf("reloaded = %v, %v", got, err)
	}
	// unknown fields from a newer writer are ignored
	os.WriteFile(path, []byte(`{"version":9,"extra":1,"peers":{"p":"10.0.0.1:1"}}`), 0o600)
	if got, err := LoadEndpointMemory(path); err != nil || got["p"] != netip.MustParseAddrPort("10.0.0.1:1") {
		t.Fatalf("newer file = %v, %v", got, err)
	}
	os.WriteFile(path, []byte(`{`), 0o600)
	if _, err := LoadEndpointMemory(path); err == nil {
		t.Fatal("corrupt file: want error")
	}
}

func TestOrderCandidates(t *testing.T) {
	a, b, c := netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:1"), netip.MustParseAddrPort("10.0.0.3:1")
	in := []netip.AddrPort{a, b, c}
	if got := orderCandidates(in, c); !slices.Equal(got, []netip.AddrPort{c, a, b}) {
		t.Errorf("remembered c: %v", got)
	}
	if got := orderCandidates(in, netip.MustParseAddrPort("10.9.9.9:1")); !slices.Equal(got, in) {
		t.Errorf("unknown remembered: %v", got)
	}
	if !slices.Equal(in, []netip.AddrPort{a, b, c}) {
		t.Errorf("input mutated: %v", in)
	}
}

func TestTrackerStep(t *testing.T) {
	a, b := netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:1")
	t0 := time.Unix(1000, 0)
	never := time.Unix(0, 0)
	timeout, stale := 15*time.Second, 275*time.Second
	tr := tracker{candidates: []netip.AddrPort{a, b}, switchedAt: t0}

	if tr.step(t0.Add(10*time.Second), never, timeout, stale) {
		t.Fatal("rotated before timeout")
	}
	if !tr.step(t0.Add(16*time.Second), never, timeout, stale) || tr.current() != b {
		t.Fatalf("want rotation to b, at %v", tr.current())
	}
	t1 := tr.switchedAt
	// handshake on b: stays while fresh
	hs := t1.Add(time.Second)
	if tr.step(t1.Add(200*time.Second), hs, timeout, stale) || tr.current() != b {
		t.Fatal("rotated away from a fresh handshake")
	}
	// stale but within the grace timeout: stays
	if tr.step(hs.Add(stale+time.Second), hs, timeout, stale) {
		t.Fatal("rotated inside the stale grace")
	}
	// stale past the grace: wraps to a
	if !tr.step(hs.Add(stale+timeout+time.Second), hs, timeout, stale) || tr.current() != a {
		t.Fatalf("want wrap to a, at %v", tr.current())
	}
	// one candidate never rotates
	one := tracker{candidates: []netip.AddrPort{a}, switchedAt: t0}
	if one.step(t0.Add(time.Hour), never, timeout, stale) {
		t.Fatal("single candidate rotated")
	}
	if (&tracker{}).current().IsValid() {
		t.Fatal("empty tracker has an endpoint")
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d", "wg.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	os.Chmod(path, 0o644)
	k2, err := LoadOrCreateKey(path)
	if err != nil || k2 != k1 {
		t.Fatalf("reload: %v (same=%v)", err, k2 == k1)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode not tightened: %v", fi.Mode())
	}
	os.WriteFile(path, []byte("garbage"), 0o600)
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Fatal("garbage key: want error")
	}
}
