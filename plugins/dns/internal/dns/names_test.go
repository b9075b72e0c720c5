package dns

import "testing"

func TestParseName(t *testing.T) {
	cases := []struct {
		in   string
		want Name
	}{
		{"api.demo-prod.internal.", Name{Kind: NameService, Service: "api", Namespace: "demo-prod"}},
		{"API.Demo-Prod.Internal", Name{Kind: NameService, Service: "api", Namespace: "demo-prod"}},
		{"api.demo-prod.nearest.internal.", Name{Kind: NameNearest, Service: "api", Namespace: "demo-prod"}},
		{"api.demo-prod.abc123.machine.internal.", Name{Kind: NameMachine, Service: "api", Namespace: "demo-prod", Machine: "abc123"}},
		{"svc-1.id.lookup.internal.", Name{Kind: NameID, ServiceID: "svc-1"}},
		{"api.demo-prod.eu.region.internal.", Name{Kind: NameUnknown}},
		{"internal.", Name{Kind: NameUnknown}},
		{"demo-prod.internal.", Name{Kind: NameUnknown}},
		{"a.b.c.d.e.internal.", Name{Kind: NameUnknown}},
		{"a..internal.", Name{Kind: NameUnknown}},
		{"example.com.", Name{Kind: NameExternal}},
		{"notinternal.", Name{Kind: NameExternal}},
		{"internal.example.com.", Name{Kind: NameExternal}},
		{".", Name{Kind: NameExternal}},
	}
	for _, c := range cases {
		if got := ParseName(c.in); got != c.want {
			t.Errorf("ParseName(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}
