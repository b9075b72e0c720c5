package daemon

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

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
	d := &Daemon{cfg: Config{DataDir: "/var/lib/ployz", RunDir: "/run/ployz"}, log: hclog.NewNullLogger(),
		rec: machine.Record{ID: "abc", Phase: machine.Participating, Subnet: netip.MustParsePrefix("10.210.7.0/24")}}
	b, err := d.dnsSpec()
	if err != nil {
		t.Fatal(err)
	}
	c, err := dns.ParseSpec(b)
	if err != nil {
		t.Fatalf("the daemon's spec does not parse: %v\n%s", err, b)
	}
	if c.Machine != "abc" || c.Listen != "10.210.7.1:53" || c.Subnet != "10.210.7.0/24" ||
		c.StoreAPI != "/run/ployz/store/api.sock" || c.StoreTokenFile != "" {
		t.Fatalf("%+v", c.Spec)
	}
}

type recordedUnits struct{ calls []string }

func (r *recordedUnits) Start(_ context.Context, u string) error {
	r.calls = append(r.calls, "start "+u)
	return nil
}
func (r *recordedUnits) Restart(_ context.Context, u string) error {
	r.calls = append(r.calls, "restart "+u)
	return nil
}
func (r *recordedUnits) Stop(_ context.Context, u string) error {
	r.calls = append(r.calls, "stop "+u)
	return nil
}
func (r *recordedUnits) Reload(context.Context) error {
	r.calls = append(r.calls, "reload")
	return nil
}

// TestRetireOldServingUnits: an upgrade from a ployzd that ran DNS under
// its own runtime unit stops and removes that unit before the plugin's
// takes the port; without one, nothing is touched.
func TestRetireOldServingUnits(t *testing.T) {
	dir := t.TempDir()
	u := &recordedUnits{}
	d := &Daemon{cfg: Config{Units: u}, log: hclog.NewNullLogger()}
	d.retireOldServingUnits(context.Background(), dir)
	if len(u.calls) != 0 {
		t.Fatalf("calls without old units: %v", u.calls)
	}
	os.WriteFile(filepath.Join(dir, "ployz-dns.service"), []byte("[Service]\n"), 0o644)
	d.retireOldServingUnits(context.Background(), dir)
	if !slices.Equal(u.calls, []string{"stop ployz-dns.service", "reload"}) {
		t.Fatalf("calls = %v", u.calls)
	}
	if _, err := os.Stat(filepath.Join(dir, "ployz-dns.service")); !os.IsNotExist(err) {
		t.Fatalf("old unit left: %v", err)
	}
}
