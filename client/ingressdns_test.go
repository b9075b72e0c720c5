package client

import (
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// TestIngressDNSOf: every routed hostname (a wildcard as routed) gets a
// record per address of every participating Machine that accepts ingress,
// A or AAAA by family, private ranges flagged; Machines without ingress,
// joining ones and tcp routes give none, and what the records cannot cover
// is noted.
func TestIngressDNSOf(t *testing.T) {
	list := rpc.MachineList{Machines: []rpc.MachineView{
		{ID: "i2", Name: "m2", Phase: "participating", Endpoints: []string{"198.51.100.2:51820", "[2001:db8::2]:51820", "198.51.100.2:51821"}},
		{ID: "i1", Name: "m1", Phase: "participating", Endpoints: []string{"10.0.0.1:51820"},
			Labels: map[string]string{rpc.MachineLabelAccepts: "ingress,services"}},
		{ID: "i3", Name: "m3", Phase: "participating", Endpoints: []string{"198.51.100.3:51820"},
			Labels: map[string]string{rpc.MachineLabelAccepts: "services"}},
		{ID: "i4", Name: "m4", Phase: "joining", Endpoints: []string{"198.51.100.4:51820"}},
		{ID: "i5", Name: "m5", Phase: "participating"},
	}}
	routes := func(rs ...ingress.Route) *ingress.Status { return &ingress.Status{Running: true, Routes: rs} }
	ms := []MachineIngress{
		{Machine: "m1", Status: routes(ingress.Route{Hostname: "app.example.com"}, ingress.Route{Hostname: "app.example.com", Path: "/api"},
			ingress.Route{Protocol: "tcp", Port: 5432})},
		{Machine: "m2", Status: routes(ingress.Route{Hostname: "*.example.org"})},
		{Machine: "m3", Status: &ingress.Status{Off: true}},
		{Machine: "m5", Error: "unreachable"},
	}
	d := IngressDNSOf(list, ms)
	var got []string
	for _, r := range d.Records {
		p := ""
		if r.Private {
			p = " private"
		}
		got = append(got, r.Name+" "+r.Type+" "+r.Value+" "+r.Machine+p)
	}
	want := []string{
		"*.example.org A 10.0.0.1 m1 private", "*.example.org A 198.51.100.2 m2", "*.example.org AAAA 2001:db8::2 m2",
		"app.example.com A 10.0.0.1 m1 private", "app.example.com A 198.51.100.2 m2", "app.example.com AAAA 2001:db8::2 m2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("records\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var names []string
	for _, m := range d.Machines {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, []string{"m1", "m2", "m5"}) {
		t.Errorf("ingress Machines %v, want m1, m2, m5", names)
	}
	notes := strings.Join(d.Notes, "\n")
	if !strings.Contains(notes, "m5 accepts ingress but advertises no address") || !strings.Contains(notes, "m5 did not answer") {
		t.Errorf("notes:\n%s", notes)
	}

	none := IngressDNSOf(rpc.MachineList{Machines: list.Machines[2:3]}, nil)
	if len(none.Records) != 0 || !strings.Contains(strings.Join(none.Notes, "\n"), "no participating Machine accepts ingress") ||
		!strings.Contains(strings.Join(none.Notes, "\n"), "no hostname is routed yet") {
		t.Errorf("without ingress Machines or hostnames: %+v", none)
	}
}
