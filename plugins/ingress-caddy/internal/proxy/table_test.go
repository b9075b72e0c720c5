package proxy

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
)

// TestUpstreamsOrderSpreads: successive requests start at successive
// upstreams within the local group; remote ones keep the route's order
// (see order); every order holds every upstream once, local ones first.
func TestUpstreamsOrderSpreads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dials []string
		local int
		first []string // the first upstream of successive orders
	}{
		{"remote only", []string{"r1", "r2", "r3"}, 0, []string{"r1", "r1", "r1"}},
		{"one local", []string{"l1", "r1", "r2"}, 1, []string{"l1", "l1", "l1"}},
		{"two local", []string{"l1", "l2", "r1"}, 2, []string{"l1", "l2", "l1"}},
		{"one upstream", []string{"r1"}, 0, []string{"r1", "r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := upstreams{dials: tc.dials, local: tc.local}
			for i, want := range tc.first {
				got := u.order(time.Now())
				if got[0] != want {
					t.Fatalf("order %d: %v, want %s first", i, got, want)
				}
				if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(tc.dials))) {
					t.Fatalf("order %d: %v is not a permutation of %v", i, got, tc.dials)
				}
				for _, d := range got[:tc.local] {
					if !slices.Contains(tc.dials[:tc.local], d) {
						t.Fatalf("order %d: %v puts remote %s among the local ones", i, got, d)
					}
				}
			}
		})
	}
}

// TestUpstreamsOrderEjectedLast: an ejected upstream is tried last on
// every turn, even a local one.
func TestUpstreamsOrderEjectedLast(t *testing.T) {
	u := upstreams{dials: []string{"ej-l1", "ej-r1", "ej-r2"}, local: 1}
	eject("ej-l1", errors.New("refused"))
	eject("ej-r2", errors.New("refused"))
	t.Cleanup(func() { unEject("ej-l1"); unEject("ej-r2") })
	for range 3 {
		got := u.order(time.Now())
		if want := []string{"ej-r1", "ej-l1", "ej-r2"}; !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

// TestBuildTableDownRoute: a route whose every ready Container is on a
// Down Machine answers 503 naming the Machines; a route merely without a
// ready Container keeps its 502.
func TestBuildTableDownRoute(t *testing.T) {
	tb := buildTable([]ingress.Route{
		{Hostname: "down.example.test", Owner: "demo/down", Down: []string{"m2", "m3"}},
		{Hostname: "pending.example.test", Owner: "demo/pending"},
		{Hostname: "some.example.test", Owner: "demo/some", Upstreams: []string{"10.210.1.2:8080"}, Down: []string{"m2"}},
	}, caddyconfig.TLS{})
	if r := tb.route("down.example.test", "/"); r.status != http.StatusServiceUnavailable || r.body != "ployz: every Container of down.example.test is on a Machine that is down (m2, m3)\n" {
		t.Fatalf("down route: %d %q", r.status, r.body)
	}
	if r := tb.route("pending.example.test", "/"); r.status != http.StatusBadGateway {
		t.Fatalf("pending route: %d %q", r.status, r.body)
	}
	if r := tb.route("some.example.test", "/x"); r.status != 0 || len(r.dials) != 1 {
		t.Fatalf("route with an upstream left: %+v", r)
	}
}

// TestTableRoutesByHostAndPath: within a hostname the longest matching
// path wins, on whole segments of the cleaned path; the exact hostname's
// routes are tried before the wildcard's, which covers one well-formed
// label; a certificate for a name or its wildcard secures it.
func TestTableRoutesByHostAndPath(t *testing.T) {
	r := func(host, path, owner string) ingress.Route {
		return ingress.Route{Hostname: host, Path: path, Owner: owner, Upstreams: []string{"10.210.1.2:80"}}
	}
	tb := buildTable([]ingress.Route{
		r("a.test", "", "site"), r("a.test", "/api", "api"), r("a.test", "/api/v2", "v2"),
		r("*.a.test", "", "wild"), r("*.a.test", "/x", "wildx"), r("c.a.test", "/api", "c-api"), r("b.test", "/only", "only"),
	}, caddyconfig.TLS{Certificates: []caddyconfig.Certificate{{Hostname: "a.test"}, {Hostname: "*.s.test"}}})
	for _, c := range []struct{ host, path, want string }{
		{"a.test", "/", "a.test"}, {"a.test", "", "a.test"}, {"a.test", "/apis", "a.test"},
		{"a.test", "/api", "a.test/api"}, {"a.test", "/api/", "a.test/api"}, {"a.test", "/api/users", "a.test/api"},
		{"a.test", "/api/v2", "a.test/api/v2"}, {"a.test", "/api/v2x", "a.test/api"}, {"a.test", "/api/v2/deep/er", "a.test/api/v2"},
		{"a.test", "/api/../api/v2/x", "a.test/api/v2"}, {"a.test", "/x/../api", "a.test/api"}, {"a.test", "//api//v2", "a.test/api/v2"},
		{"c.a.test", "/", "*.a.test"}, {"c.a.test", "/x/y", "*.a.test/x"}, {"c.a.test", "/api/1", "c.a.test/api"},
		{"a.b.a.test", "/", ""}, {"bad_label.a.test", "/", ""}, {"b.test", "/", ""}, {"b.test", "/only/1", "b.test/only"}, {"z.test", "/", ""},
	} {
		rt := tb.route(c.host, c.path)
		got := ""
		if rt != nil {
			for k, h := range tb.http {
				if slices.Contains(h.routes, rt) {
					got = k + rt.path
				}
			}
		}
		if got != c.want {
			t.Errorf("route(%q, %q) = %q, want %q", c.host, c.path, got, c.want)
		}
	}
	for host, want := range map[string]bool{"a.test": true, "c.a.test": false, "x.s.test": true, "s.test": false, "b.test": false} {
		if got := tb.secures(host); got != want {
			t.Errorf("secures(%q) = %v, want %v", host, got, want)
		}
	}
	for raw, want := range map[string]string{"": "/", "/": "/", "/a/": "/a/", "/a/./b": "/a/b", "/a/../../b/": "/b/", "a": "/a", "/a//b": "/a/b"} {
		if got := cleanPath(raw); got != want {
			t.Errorf("cleanPath(%q) = %q, want %q", raw, got, want)
		}
	}
}
