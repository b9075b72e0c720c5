package dns

import (
	"net/netip"
	"slices"
	"testing"
)

func ips(a []netip.Addr) []string {
	var out []string
	for _, x := range a {
		out = append(out, x.String())
	}
	return out
}

func TestTableAnswerSets(t *testing.T) {
	tb := NewTable(testMachines, demoRows())
	subnet := netip.MustParsePrefix("10.210.1.0/24")
	cases := []struct {
		name  string
		want  []string
		found bool
	}{
		// Not ready (c3) and no IP (c5) are left out.
		{"api.demo-prod.internal", []string{"10.210.1.2", "10.210.2.2", "10.210.3.2"}, true},
		{"api.demo-prod.m2.machine.internal", []string{"10.210.2.2"}, true},
		{"api.demo-prod.m9.machine.internal", nil, false},
		{"svc-db.id.lookup.internal", []string{"10.210.3.9"}, true},
		{"db.demo-prod.internal", []string{"10.210.3.9"}, true},
		{"api.other.internal", nil, false},
		{"nope.id.lookup.internal", nil, false},
	}
	for _, c := range cases {
		got, found := tb.Lookup(ParseName(c.name), "m1", subnet, 0)
		if found != c.found || !slices.Equal(ips(got), c.want) {
			t.Errorf("%s = %v %v, want %v %v", c.name, ips(got), found, c.want, c.found)
		}
	}
}

func TestTableRotation(t *testing.T) {
	tb := NewTable(testMachines, demoRows())
	n := ParseName("api.demo-prod.internal")
	firsts := map[string]int{}
	for rot := range uint64(6) {
		got, _ := tb.Lookup(n, "m1", netip.Prefix{}, rot)
		if len(got) != 3 {
			t.Fatalf("rot %d: %v", rot, got)
		}
		firsts[got[0].String()]++
		// Every rotation is the same set.
		s := ips(got)
		slices.Sort(s)
		if !slices.Equal(s, []string{"10.210.1.2", "10.210.2.2", "10.210.3.2"}) {
			t.Fatalf("rot %d: set %v", rot, s)
		}
	}
	if len(firsts) != 3 {
		t.Fatalf("rotation does not move the first answer: %v", firsts)
	}
}

func TestTableNearestLocalFirst(t *testing.T) {
	rows := append(demoRows(), row("c7", "m1", "api", "demo-prod", "svc-api", "10.210.1.3", true))
	tb := NewTable(testMachines, rows)
	n := ParseName("api.demo-prod.nearest.internal")
	for rot := range uint64(8) {
		got := ips(mustLookup(t, tb, n, "m1", rot))
		if len(got) != 4 {
			t.Fatalf("rot %d: %v", rot, got)
		}
		local := got[:2]
		slices.Sort(local)
		if !slices.Equal(local, []string{"10.210.1.2", "10.210.1.3"}) {
			t.Fatalf("rot %d: local Containers not first: %v", rot, got)
		}
	}
	// From m3 its own Container comes first.
	if got := ips(mustLookup(t, tb, n, "m3", 0)); got[0] != "10.210.3.2" {
		t.Fatalf("from m3: %v", got)
	}
}

func mustLookup(t *testing.T, tb *Table, n Name, local string, rot uint64) []netip.Addr {
	t.Helper()
	got, ok := tb.Lookup(n, local, netip.Prefix{}, rot)
	if !ok {
		t.Fatalf("%+v not found", n)
	}
	return got
}
