package serving

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/sdk/dns"
)

func TestParseResolvConfSkipsLoopbackStubs(t *testing.T) {
	got := parseResolvConf(strings.NewReader("# comment\nnameserver 127.0.0.53\nsearch lan\nnameserver 192.168.1.1\nnameserver fe80::1%eth0\noptions edns0\n"))
	if !slices.Equal(got, []string{"192.168.1.1:53", "[fe80::1]:53"}) {
		t.Fatalf("%v", got)
	}
	// Only a stub: use it rather than nothing.
	if got := parseResolvConf(strings.NewReader("nameserver 127.0.0.11\n")); !slices.Equal(got, []string{"127.0.0.11:53"}) {
		t.Fatalf("%v", got)
	}
}

func TestDNSSpecFromRecord(t *testing.T) {
	h := newHost(t, machine.Record{ID: "abc", Phase: machine.Participating, Subnet: netip.MustParsePrefix("10.210.7.0/24")})
	b, err := h.feature().DNSSpec()
	if err != nil {
		t.Fatal(err)
	}
	c, err := dns.ParseSpec(b)
	if err != nil {
		t.Fatalf("the daemon's spec does not parse: %v\n%s", err, b)
	}
	if c.Machine != "abc" || c.Listen != "10.210.7.1:53" || c.Subnet != "10.210.7.0/24" ||
		c.StoreAPI != filepath.Join(h.run, "store", "api.sock") || c.StoreTokenFile != "" {
		t.Fatalf("%+v", c.Spec)
	}
}

// TestRetireOldServingUnits: an upgrade from a ployzd that ran DNS under
// its own runtime unit stops and removes that unit before the plugin's
// takes the port; without one, nothing is touched.
func TestRetireOldServingUnits(t *testing.T) {
	dir := t.TempDir()
	h := newHost(t, machine.Record{})
	f := h.feature()
	f.RetireOldUnits(context.Background(), dir)
	if len(h.units.calls) != 0 {
		t.Fatalf("calls without old units: %v", h.units.calls)
	}
	os.WriteFile(filepath.Join(dir, "ployz-dns.service"), []byte("[Service]\n"), 0o644)
	f.RetireOldUnits(context.Background(), dir)
	if !slices.Equal(h.units.calls, []string{"stop ployz-dns.service", "reload"}) {
		t.Fatalf("calls = %v", h.units.calls)
	}
	if _, err := os.Stat(filepath.Join(dir, "ployz-dns.service")); !os.IsNotExist(err) {
		t.Fatalf("old unit left: %v", err)
	}
}
