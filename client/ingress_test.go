package client

import (
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

func TestServiceIngressStatus(t *testing.T) {
	pub := func(h, owner string) rpc.IngressState {
		return rpc.IngressState{Hostname: h, Owner: owner, State: rpc.RoutePublished, Upstreams: []string{"10.0.0.1:80"}}
	}
	st := func(routes ...rpc.IngressState) *rpc.IngressStatus {
		return &rpc.IngressStatus{Running: true, Routes: routes}
	}
	hosts := []string{"a.example.test"}
	cases := map[string]struct {
		ms   []MachineIngress
		want string
	}{
		"published everywhere": {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/web"))}, {Machine: "m2", Status: st(pub("a.example.test", "d/web"))}}, rpc.RoutePublished},
		"not loaded on one":    {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/web"))}, {Machine: "m2", Status: st()}}, rpc.RoutePending},
		"proxy not running":    {[]MachineIngress{{Machine: "m1", Status: &rpc.IngressStatus{}}}, rpc.RoutePending},
		"owned by another":     {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/other"))}}, rpc.RouteConflict},
		"stale":                {[]MachineIngress{{Machine: "m1", Status: &rpc.IngressStatus{Running: true, Stale: true, Routes: []rpc.IngressState{pub("a.example.test", "d/web")}}}}, "unknown"},
		"no answer":            {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/web"))}, {Machine: "m2", Error: "unreachable"}}, "unknown"},
		// A Machine without ingress serves nothing and counts for nothing.
		"one without ingress": {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/web"))}, {Machine: "m2", Status: &rpc.IngressStatus{Off: true}}}, rpc.RoutePublished},
		"none with ingress":   {[]MachineIngress{{Machine: "m1", Status: &rpc.IngressStatus{Off: true}}}, rpc.RoutePending},
	}
	for name, c := range cases {
		got, per := ServiceIngress("d/web", hosts, c.ms)
		if got != c.want || len(per) != len(c.ms) {
			t.Errorf("%s: %s (%+v), want %s", name, got, per, c.want)
		}
	}
}

// TestRouteOfKey: a route key names its route back, path routes included.
func TestRouteOfKey(t *testing.T) {
	for _, r := range []rpc.IngressState{{Hostname: "a.example.test"}, {Hostname: "a.example.test", Path: "/api/v1"},
		{Hostname: "*.example.test", Path: "/x"}, {Protocol: "tcp", Port: 5432}} {
		if got := routeOfKey(r.Key()); got.Hostname != r.Hostname || got.Path != r.Path || got.Protocol != r.Protocol || got.Port != r.Port {
			t.Errorf("routeOfKey(%q) = %+v, want %+v", r.Key(), got, r)
		}
	}
}
