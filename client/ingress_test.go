package client

import (
	"testing"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
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
		// A Machine without ingress serves nothing and counts for nothing.
		"one without ingress": {[]MachineIngress{{Machine: "m1", Status: st(pub("a.example.test", "d/web"))}, {Machine: "m2", Status: &ingress.Status{Off: true}}}, ingress.RoutePublished},
		"none with ingress":   {[]MachineIngress{{Machine: "m1", Status: &ingress.Status{Off: true}}}, ingress.RoutePending},
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
	for _, r := range []ingress.Route{{Hostname: "a.example.test"}, {Hostname: "a.example.test", Path: "/api/v1"},
		{Hostname: "*.example.test", Path: "/x"}, {Protocol: "tcp", Port: 5432}} {
		if got := routeOfKey(r.Key()); got.Hostname != r.Hostname || got.Path != r.Path || got.Protocol != r.Protocol || got.Port != r.Port {
			t.Errorf("routeOfKey(%q) = %+v, want %+v", r.Key(), got, r)
		}
	}
}

// TestIngressOfRedactsUsers: a Service's routes show basic
// authentication's user names, never their hashes, and the caller's
// routes keep theirs.
func TestIngressOfRedactsUsers(t *testing.T) {
	routes := []deploy.IngressRoute{{Hostname: "a.example.test", ContainerPort: 80,
		Options: routeopt.Options{BasicAuth: &routeopt.BasicAuth{Realm: "staff", Users: map[string]string{"alice": "$2y$10$hash"}}}}}
	st := IngressOf("d", "web", routes, func() ([]MachineIngress, error) { return nil, nil })
	if a := st.Routes[0].BasicAuth; a == nil || a.Realm != "staff" || len(a.Users) != 1 || a.Users["alice"] != "" {
		t.Fatalf("status route auth %+v: want alice without her hash", a)
	}
	if routes[0].BasicAuth.Users["alice"] != "$2y$10$hash" {
		t.Fatal("the declared route lost its hash")
	}
}
