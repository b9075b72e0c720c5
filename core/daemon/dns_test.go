package daemon

import (
	"net/netip"
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
		c.StoreAPI != "127.0.0.1:7571" || c.StoreTokenFile != "/var/lib/ployz/store/token" {
		t.Fatalf("%+v", c.Spec)
	}
}
