package client

import (
	"testing"

	"github.com/ployz/ployz/sdk/ingress"
)

func TestServiceIngressStatus(t *testing.T) {
	pub := func(h, owner string) ingress.Route {
		return ingress.Route{Hostname: h, Owner: owner, State: ingress.RoutePublished, Upstreams: []string{"10.0.0.1:80"}}
	}
	st := func(routes ...ingress.Route) *ingress.Status {
		return &ingress.Status{Running: true, Routes: routes}
	}
	hosts := []string{"a.example.test"}
	cases := map[string]struct {
		ms   []MachineIngress
		want string
	}{
		"published everywhere": {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/web"))}, {Machine: "m2", Status: st(pub("a.example.test", "d/web"))}}, ingress.RoutePublished},
		"not loaded on one":    {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/web"))}, {Machine: "m2", Status: st()}}, ingress.RoutePending},
		"proxy not running":    {[]MachineIngress{{Machine: "m1", Status: &ingress.Status{}}}, ingress.RoutePending},
		"owned by another":     {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/other"))}}, ingress.RouteConflict},
		"stale":                {[]MachineIngress{{Machine: "m1", Status: &ingress.Status{Running: true, Stale: true, Routes: []ingress.Route{pub("a.example.test", "d/web")}}}}, "unknown"},
		"no answer":            {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/web"))}, {Machine: "m2", Error: "unreachable"}}, "unknown"},
	}
	for name, c := range cases {
		got, per := ServiceIngress("d/web", hosts, c.ms)
		if got != c.want || len(per) != len(c.ms) {
			t.Errorf("%s: %s (%+v), want %s", name, got, per, c.want)
		}
	}
}
