package dns

import (
	"net/netip"
	"testing"
)

func TestParseName(t *testing.T) {
	cases := []struct {
		in   string
		want Name
	}{
		{"api.demo-prod.internal.", Name{Kind: NameService, Service: "api", Namespace: "demo-prod", Key: "api.demo-prod"}},
		{"API.Demo-Prod.Internal", Name{Kind: NameService, Service: "api", Namespace: "demo-prod", Key: "api.demo-prod"}},
		{"api.demo-prod.nearest.internal.", Name{Kind: NameNearest, Service: "api", Namespace: "demo-prod", Key: "api.demo-prod"}},
		{"api.demo-prod.abc123.machine.internal.", Name{Kind: NameMachine, Service: "api", Namespace: "demo-prod", Machine: "abc123", Key: "api.demo-prod"}},
		{"svc-1.id.lookup.internal.", Name{Kind: NameID, ServiceID: "svc-1"}},
		{"api.internal.", Name{Kind: NameShort, Service: "api"}},
		{"Api.Internal", Name{Kind: NameShort, Service: "api"}},
		{"api.demo-prod.eu.region.internal.", Name{Kind: NameUnknown}},
		{"internal.", Name{Kind: NameUnknown}},
		{"a.b.c.d.e.internal.", Name{Kind: NameUnknown}},
		{"a.b.c.d.e.f.internal.", Name{Kind: NameUnknown}},
		{"a..internal.", Name{Kind: NameUnknown}},
		{".internal.", Name{Kind: NameUnknown}},
		{"example.com.", Name{Kind: NameExternal}},
		{"notinternal.", Name{Kind: NameExternal}},
		{"internal.example.com.", Name{Kind: NameExternal}},
		{".", Name{Kind: NameExternal}},
		{"2.1.210.10.in-addr.arpa.", Name{Kind: NameReverse, Addr: netip.MustParseAddr("10.210.1.2")}},
		{"2.1.210.10.IN-ADDR.ARPA", Name{Kind: NameReverse, Addr: netip.MustParseAddr("10.210.1.2")}},
		{"255.0.0.0.in-addr.arpa.", Name{Kind: NameReverse, Addr: netip.MustParseAddr("0.0.0.255")}},
		// Not one address: forwarded like any outside name.
		{"1.210.10.in-addr.arpa.", Name{Kind: NameExternal}},
		{"1.2.1.210.10.in-addr.arpa.", Name{Kind: NameExternal}},
		{"256.1.210.10.in-addr.arpa.", Name{Kind: NameExternal}},
		{"02.1.210.10.in-addr.arpa.", Name{Kind: NameExternal}},
		{"x.1.210.10.in-addr.arpa.", Name{Kind: NameExternal}},
		{".1.210.10.in-addr.arpa.", Name{Kind: NameExternal}},
		{"in-addr.arpa.", Name{Kind: NameExternal}},
	}
	for _, c := range cases {
		if got := ParseName(c.in); got != c.want {
			t.Errorf("ParseName(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestParseNameAllocatesNothing(t *testing.T) {
	for _, q := range []string{"api.demo-prod.internal.", "api.demo-prod.nearest.internal.", "2.1.210.10.in-addr.arpa.", "example.com."} {
		if n := testing.AllocsPerRun(100, func() { ParseName(q) }); n != 0 {
			t.Errorf("ParseName(%q): %v allocations", q, n)
		}
	}
}
