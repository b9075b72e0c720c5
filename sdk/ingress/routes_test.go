package ingress

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
	"golang.org/x/crypto/bcrypt"
)

func row(key, machine, ns, svc, ip string, ready bool, routes ...store.IngressRoute) store.Row[store.ContainerBody] {
	return store.Row[store.ContainerBody]{Key: key, Owner: machine, Body: store.ContainerBody{
		Namespace: ns, Service: svc, IP: ip, Ready: ready, State: "running", Ingress: routes}}
}

func hello(port int) store.IngressRoute {
	return store.IngressRoute{Hostname: "hello.example.test", ContainerPort: port}
}

func TestComputeLocalFirstOnlyReady(t *testing.T) {
	rows := []store.Row[store.ContainerBody]{
		row("a", "m2", "demo", "web", "10.210.2.5", true, hello(8080)),
		row("b", "m1", "demo", "web", "10.210.1.9", true, hello(8080)),
		row("c", "m3", "demo", "web", "10.210.3.2", true, hello(8080)),
		row("d", "m1", "demo", "web", "10.210.1.3", false, hello(8080)), // not ready
		row("e", "m1", "demo", "web", "", true, hello(8080)),            // no IP
		row("f", "m1", "demo", "api", "10.210.1.4", true),               // no routes
	}
	got := Compute(Input{Machines: testMachines, Containers: rows, Machine: "m1", Prev: nil})
	if len(got.Routes) != 1 || len(got.Skipped) != 0 {
		t.Fatalf("got %+v", got)
	}
	r := got.Routes[0]
	want := []string{"10.210.1.9:8080", "10.210.2.5:8080", "10.210.3.2:8080"}
	if r.Owner != "demo/web" || r.State != RoutePublished || !slices.Equal(r.Upstreams, want) || r.Local != 1 {
		t.Fatalf("route %+v, want upstreams %v, one local", r, want)
	}
	// From m3's point of view its own Container comes first.
	if r := Compute(Input{Machines: testMachines, Containers: rows, Machine: "m3", Prev: nil}).Routes[0]; r.Upstreams[0] != "10.210.3.2:8080" || r.Local != 1 {
		t.Fatalf("m3 upstreams %v (%d local)", r.Upstreams, r.Local)
	}
	// m4 runs none of them: every upstream is remote.
	if r := Compute(Input{Machines: testMachines, Containers: rows, Machine: "m4", Prev: nil}).Routes[0]; r.Local != 0 || len(r.Upstreams) != 3 {
		t.Fatalf("m4 upstreams %v (%d local)", r.Upstreams, r.Local)
	}
}

func TestComputePendingWithoutReadyBackend(t *testing.T) {
	got := Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{row("a", "m1", "demo", "web", "10.210.1.2", false, hello(8080))}, Machine: "m1", Prev: nil})
	if r := got.Routes[0]; r.State != RoutePending || len(r.Upstreams) != 0 || r.Owner != "demo/web" {
		t.Fatalf("route %+v", r)
	}
}

func TestComputeConflictKeepsPreviousOwner(t *testing.T) {
	web := row("a", "m1", "demo", "web", "10.210.1.2", true, hello(8080))
	rival := row("b", "m1", "alpha", "site", "10.210.1.3", true, hello(80))
	first := Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{web}, Machine: "m1", Prev: nil})
	if first.Routes[0].State != RoutePublished {
		t.Fatalf("first %+v", first.Routes)
	}
	// alpha/site sorts lower, but demo/web was published first: it stays.
	got := Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{web, rival}, Machine: "m1", Prev: first.ByKey()})
	r := got.Routes[0]
	if r.State != RouteConflict || r.Owner != "demo/web" || !slices.Equal(r.Upstreams, []string{"10.210.1.2:8080"}) {
		t.Fatalf("conflict route %+v", r)
	}
	if !slices.Equal(r.Claimants, []string{"alpha/site", "demo/web"}) || !strings.Contains(r.Detail, "alpha/site") {
		t.Fatalf("claimants %v detail %q", r.Claimants, r.Detail)
	}
	// With no previous owner nothing is published: no owner, no upstream.
	r = Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{web, rival}, Machine: "m1", Prev: nil}).Routes[0]
	if r.State != RouteConflict || r.Owner != "" || len(r.Upstreams) != 0 || !strings.Contains(r.Detail, "nothing published") {
		t.Fatalf("fresh conflict %+v", r)
	}
	// The rival leaves: published again.
	if r := Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{web}, Machine: "m1", Prev: map[string]Route{"hello.example.test": {Owner: "demo/web"}}}).Routes[0]; r.State != RoutePublished {
		t.Fatalf("after conflict %+v", r)
	}
}

func TestComputeSkipsInvalidRoutes(t *testing.T) {
	rows := []store.Row[store.ContainerBody]{
		row("bad-host", "m1", "demo", "web", "10.210.1.2", true, store.IngressRoute{Hostname: "bad_host!.example", ContainerPort: 80}),
		row("bad-port", "m1", "demo", "web", "10.210.1.2", true, hello(70000)),
		row("single", "m1", "demo", "web", "10.210.1.2", true, store.IngressRoute{Hostname: "localhost", ContainerPort: 80}),
		row("anon", "m1", "", "", "10.210.1.2", true, hello(80)),
		row("ok", "m1", "demo", "web", "10.210.1.2", true, store.IngressRoute{Hostname: "Hello.Example.Test.", ContainerPort: 8080}),
	}
	got := Compute(Input{Machines: testMachines, Containers: rows, Machine: "m1", Prev: nil})
	if len(got.Routes) != 1 || got.Routes[0].Hostname != "hello.example.test" {
		t.Fatalf("routes %+v", got.Routes)
	}
	want := map[string]string{
		"bad-host": `field "ingress[0].hostname"`,
		"bad-port": `field "ingress[0].container_port" is 70000`,
		"single":   `field "ingress[0].hostname" "localhost" needs at least two labels`,
		"anon":     `field "namespace"/"service" is empty`,
	}
	if len(got.Skipped) != len(want) {
		t.Fatalf("skipped %+v", got.Skipped)
	}
	for _, s := range got.Skipped {
		if !strings.Contains(s.Reason, want[s.Container]) {
			t.Errorf("%s: reason %q lacks %q", s.Container, s.Reason, want[s.Container])
		}
	}
}

func TestValidHostname(t *testing.T) {
	for _, h := range []string{"a.b", "hello.example.test", "x-1.y2.z"} {
		if err := ValidHostname(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	for _, h := range []string{"", "localhost", "*.example.com", "a..b", "-a.b", "a.b:80", "A.b", strings.Repeat("a", 64) + ".b"} {
		if err := ValidHostname(h); err == nil {
			t.Errorf("%q accepted", h)
		}
	}
}

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec([]byte(`{"machine":"m1","listen":":80","store_api":"127.0.0.1:7571","extra":1}`))
	if err != nil || s.StatusFile != DefaultStatusPath || s.StateDir != DefaultStateDir {
		t.Fatalf("%+v %v", s, err)
	}
	for in, field := range map[string]string{
		`{"listen":":80","store_api":"127.0.0.1:1"}`:              `"machine"`,
		`{"machine":"m","listen":"80","store_api":"127.0.0.1:1"}`: `"listen"`,
		`{"machine":"m","listen":":80","store_api":"nowhere"}`:    `"store_api"`,
	} {
		if _, err := ParseSpec([]byte(in)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want field %s", in, err, field)
		}
	}
}

func pointer(svc, id string, cs ...store.ServingContainer) store.Row[store.ServingBody] {
	return store.Row[store.ServingBody]{Key: svc, Body: store.ServingBody{ID: id, Containers: cs}}
}

func TestComputeFollowsServingPointer(t *testing.T) {
	old := row("old", "m1", "demo", "web", "10.210.1.2", true, hello(8080))
	old.Body.Deployment, old.Body.ImageID = "d1", "sha256:aaa"
	nu := row("new", "m2", "demo", "web", "10.210.2.2", true, hello(8080))
	nu.Body.Deployment, nu.Body.ImageID = "d2", "sha256:bbb"
	rows := []store.Row[store.ContainerBody]{old, nu}

	// No pointer: every ready Container serves.
	if r := Compute(Input{Machines: testMachines, Containers: rows, Machine: "m1"}).Routes[0]; len(r.Upstreams) != 2 || r.Pointer != "" {
		t.Fatalf("no pointer %+v", r)
	}
	// The pointer names the old one: the new, ready one is not adopted.
	p1 := pointer("demo/web", "p1", store.ServingContainer{ID: "old", Machine: "m1", ImageID: "sha256:aaa", Deployment: "d1"})
	got := Compute(Input{Machines: testMachines, Containers: rows, Pointers: []store.Row[store.ServingBody]{p1}, Machine: "m1"})
	if r := got.Routes[0]; !slices.Equal(r.Containers, []string{"old"}) || r.Pointer != "p1" || got.Pointers["demo/web"] != "p1" {
		t.Fatalf("pointer p1 %+v %v", r, got.Pointers)
	}
	// Moved to the new one.
	p2 := pointer("demo/web", "p2", store.ServingContainer{ID: "new", Machine: "m2", ImageID: "sha256:bbb", Deployment: "d2"})
	if r := Compute(Input{Machines: testMachines, Containers: rows, Pointers: []store.Row[store.ServingBody]{p2}, Machine: "m1"}).Routes[0]; !slices.Equal(r.Upstreams, []string{"10.210.2.2:8080"}) {
		t.Fatalf("pointer p2 %+v", r)
	}
	// Same id, other identity (an older deployment's Container that
	// became ready late, or another image): not routed, pending.
	stale := pointer("demo/web", "p3", store.ServingContainer{ID: "new", Machine: "m2", ImageID: "sha256:bbb", Deployment: "d3"})
	r := Compute(Input{Machines: testMachines, Containers: rows, Pointers: []store.Row[store.ServingBody]{stale}, Machine: "m1"}).Routes[0]
	if len(r.Upstreams) != 0 || r.State != RoutePending || !strings.Contains(r.Detail, "Serving Pointer") {
		t.Fatalf("stale identity %+v", r)
	}
}

func TestComputeStaleSessionNotRouted(t *testing.T) {
	a := row("a", "m1", "demo", "web", "10.210.1.2", true, hello(8080))
	a.Body.Session = "boot1"
	in := Input{Containers: []store.Row[store.ContainerBody]{a}, Machine: "m1", Machines: serving.Machines{Sessions: map[string]string{"m1": "boot2"}, Subnets: testMachines.Subnets}}
	if r := Compute(in).Routes[0]; r.State != RoutePending {
		t.Fatalf("stale session routed: %+v", r)
	}
	in.Sessions["m1"] = "boot1"
	if r := Compute(in).Routes[0]; r.State != RoutePublished {
		t.Fatalf("current session not routed: %+v", r)
	}
}

func TestComputeYoungPointerHoldsPreviousUpstreams(t *testing.T) {
	old := row("old", "m1", "demo", "web", "10.210.1.2", true, hello(8080))
	nu := row("new", "m2", "demo", "web", "10.210.2.2", false, hello(8080)) // ready row not here yet
	p1 := pointer("demo/web", "p1", store.ServingContainer{ID: "old", Machine: "m1"})
	p2 := pointer("demo/web", "p2", store.ServingContainer{ID: "new", Machine: "m2"})
	rows := []store.Row[store.ContainerBody]{old, nu}
	first := Compute(Input{Machines: testMachines, Containers: rows, Pointers: []store.Row[store.ServingBody]{p1}, Machine: "m1"})
	in := Input{Machines: testMachines, Containers: rows, Pointers: []store.Row[store.ServingBody]{p2}, Machine: "m1", Prev: first.ByKey(), Young: map[string]bool{"p2": true}}
	got := Compute(in)
	if r := got.Routes[0]; !slices.Equal(r.Containers, []string{"old"}) || r.Pointer != "p1" || r.Local != 1 || got.Pointers["demo/web"] != "p1" {
		t.Fatalf("held route %+v, acks %v", r, got.Pointers)
	}
	// Once the new row is ready, the pointer is followed and acked.
	rows[1].Body.Ready = true
	got = Compute(in)
	if r := got.Routes[0]; !slices.Equal(r.Containers, []string{"new"}) || got.Pointers["demo/web"] != "p2" {
		t.Fatalf("followed route %+v, acks %v", r, got.Pointers)
	}
	// A pointer that stays unready past the hold window is followed: 502.
	rows[1].Body.Ready = false
	in.Young = nil
	if got := Compute(in); got.Routes[0].State != RoutePending || got.Pointers["demo/web"] != "p2" {
		t.Fatalf("old pointer %+v", got)
	}
}

// TestComputeTCPRoutes: tcp rows become "tcp/PORT" routes whose
// upstreams are ip:container_port, local first; a pending one says it has
// no listener; a row claiming a port Ployz uses is skipped with the field.
func TestComputeTCPRoutes(t *testing.T) {
	db := store.IngressRoute{Protocol: "tcp", Port: 8081, ContainerPort: 5432}
	rows := []store.Row[store.ContainerBody]{
		row("a", "m2", "demo", "db", "10.210.2.5", true, db),
		row("b", "m1", "demo", "db", "10.210.1.9", true, db, hello(8080)),
		row("c", "m1", "demo", "cache", "10.210.1.7", false, store.IngressRoute{Protocol: "tcp", Port: 6379, ContainerPort: 6379}),
		row("d", "m1", "demo", "evil", "10.210.1.8", true, store.IngressRoute{Protocol: "tcp", Port: 443, ContainerPort: 443}),
	}
	got := Compute(Input{Machines: testMachines, Containers: rows, Machine: "m1"})
	keys := []string{}
	for _, r := range got.Routes {
		keys = append(keys, r.Key())
	}
	if strings.Join(keys, " ") != "hello.example.test tcp/6379 tcp/8081" {
		t.Fatalf("routes %v", keys)
	}
	if r := got.Routes[2]; r.Owner != "demo/db" || r.State != RoutePublished || strings.Join(r.Upstreams, ",") != "10.210.1.9:5432,10.210.2.5:5432" {
		t.Errorf("tcp/8081 %+v", r)
	}
	if r := got.Routes[1]; r.State != RoutePending || !strings.Contains(r.Detail, "no listener") {
		t.Errorf("tcp/6379 %+v", r)
	}
	if len(got.Skipped) != 1 || got.Skipped[0].Container != "d" || !strings.Contains(got.Skipped[0].Reason, `field "ingress[0].port" is 443, used by HTTPS ingress`) {
		t.Errorf("skipped %+v", got.Skipped)
	}
}

// TestComputeIgnoresUnvouchedRows: ready rows whose address is cloud
// metadata, loopback, another Machine's subnet, or whose owner does not
// participate are no upstream and claim nothing (no conflict with the
// legitimate owner, no route of their own); each is skipped, naming its
// address.
func TestComputeIgnoresUnvouchedRows(t *testing.T) {
	rows := []store.Row[store.ContainerBody]{
		row("ok", "m1", "demo", "web", "10.210.1.2", true, hello(8080)),
		row("meta", "m1", "evil", "meta", "169.254.169.254", true, hello(80)),
		row("lo", "m2", "evil", "lo", "127.0.0.1", true, store.IngressRoute{Hostname: "admin.example.test", ContainerPort: 2019}),
		row("other", "m1", "demo", "web", "10.210.2.7", true, hello(8080)),
		row("ghost", "m9", "evil", "ghost", "10.210.9.2", true, store.IngressRoute{Protocol: "tcp", Port: 6379, ContainerPort: 6379}),
	}
	got := Compute(Input{Machines: testMachines, Containers: rows, Machine: "m1"})
	if len(got.Routes) != 1 {
		t.Fatalf("routes %+v, want only hello.example.test", got.Routes)
	}
	if r := got.Routes[0]; r.State != RoutePublished || r.Owner != "demo/web" || !slices.Equal(r.Upstreams, []string{"10.210.1.2:8080"}) {
		t.Fatalf("legitimate route %+v", r)
	}
	reasons := map[string]string{}
	for _, sk := range got.Skipped {
		reasons[sk.Container] = sk.Reason
	}
	for key, ip := range map[string]string{"meta": "169.254.169.254", "lo": "127.0.0.1", "other": "10.210.2.7", "ghost": "10.210.9.2"} {
		if r := reasons[key]; !strings.Contains(r, `field "ip"`) || !strings.Contains(r, ip) {
			t.Errorf("skipped %s: %q, want the field and address %s", key, r, ip)
		}
	}
	if len(reasons) != 4 || got.Refused != 4 {
		t.Errorf("skipped %+v, refused %d; want the 4 rows", got.Skipped, got.Refused)
	}
}

// testMachines are m1..m3 participating with the subnets the tests' rows
// use: Machine mN holds 10.210.N.0/24.
var testMachines = serving.Machines{Subnets: map[string]netip.Prefix{
	"m1": netip.MustParsePrefix("10.210.1.0/24"), "m2": netip.MustParsePrefix("10.210.2.0/24"), "m3": netip.MustParsePrefix("10.210.3.0/24")}}

// TestComputeLeavesOutDownMachines: upstreams on a Machine this one holds
// Down are left out and named; with none left the route is pending and
// says it answers 503.
func TestComputeLeavesOutDownMachines(t *testing.T) {
	rows := []store.Row[store.ContainerBody]{
		row("a", "m1", "demo", "web", "10.210.1.9", true, hello(8080)),
		row("b", "m2", "demo", "web", "10.210.2.5", true, hello(8080)),
	}
	ms := testMachines
	ms.Down = map[string]bool{"m2": true}
	r := Compute(Input{Machines: ms, Containers: rows, Machine: "m3"}).Routes[0]
	if !slices.Equal(r.Upstreams, []string{"10.210.1.9:8080"}) || !slices.Equal(r.Down, []string{"m2"}) || r.State != RoutePublished || !strings.Contains(r.Detail, "m2") {
		t.Fatalf("route with m2 down: %+v", r)
	}
	ms.Down = map[string]bool{"m1": true, "m2": true}
	r = Compute(Input{Machines: ms, Containers: rows, Machine: "m3"}).Routes[0]
	if len(r.Upstreams) != 0 || !slices.Equal(r.Down, []string{"m1", "m2"}) || r.State != RoutePending || !strings.Contains(r.Detail, "503") {
		t.Fatalf("route with every replica down: %+v", r)
	}
}

// TestComputePathRoutes: a hostname and a path prefix make one route, so
// two Services split one hostname by path, and a conflict is on one
// hostname and path alone. The owner's options come with the route: from
// a serving row before a row that is not, the newest first. Wildcard
// hostnames are routes; a bad path is skipped naming the field.
func TestComputePathRoutes(t *testing.T) {
	no := false
	api := store.IngressRoute{Hostname: "app.example.test", Path: "/api", Options: routeopt.Options{StripPrefix: true, RedirectHTTPS: &no}, ContainerPort: 8080}
	site := store.IngressRoute{Hostname: "App.Example.Test.", ContainerPort: 80}
	wild := store.IngressRoute{Hostname: "*.example.test", ContainerPort: 80}
	rows := []store.Row[store.ContainerBody]{
		row("a1", "m1", "demo", "api", "10.210.1.2", true, api),
		row("s1", "m1", "demo", "site", "10.210.1.3", true, site, wild),
		row("bad", "m1", "demo", "other", "10.210.1.4", true, store.IngressRoute{Hostname: "app.example.test", Path: "/a//b", ContainerPort: 80}),
	}
	got := Compute(Input{Machines: testMachines, Containers: rows, Machine: "m1"})
	byKey := got.ByKey()
	if len(got.Routes) != 3 || len(got.Skipped) != 1 || !strings.Contains(got.Skipped[0].Reason, `field "ingress[0].path" "/a//b" has an empty segment`) {
		t.Fatalf("routes %+v skipped %+v", got.Routes, got.Skipped)
	}
	a, s, w := byKey["app.example.test/api"], byKey["app.example.test"], byKey["*.example.test"]
	if a.Owner != "demo/api" || a.Path != "/api" || !a.StripPrefix || a.RedirectHTTPS == nil || *a.RedirectHTTPS || a.State != RoutePublished ||
		!slices.Equal(a.Upstreams, []string{"10.210.1.2:8080"}) {
		t.Errorf("api route %+v", a)
	}
	if s.Owner != "demo/site" || s.Path != "" || s.StripPrefix || s.RedirectHTTPS != nil || !slices.Equal(s.Upstreams, []string{"10.210.1.3:80"}) {
		t.Errorf("site route %+v", s)
	}
	if w.Owner != "demo/site" || w.State != RoutePublished {
		t.Errorf("wildcard route %+v", w)
	}

	// A rival for /api is a conflict there only; the previous owner keeps it.
	rival := row("r1", "m1", "alpha", "api", "10.210.1.5", true, store.IngressRoute{Hostname: "app.example.test", Path: "/api/", ContainerPort: 9000})
	got = Compute(Input{Machines: testMachines, Containers: append(rows, rival), Machine: "m1", Prev: byKey})
	byKey = got.ByKey()
	if r := byKey["app.example.test/api"]; r.State != RouteConflict || r.Owner != "demo/api" || !r.StripPrefix ||
		!slices.Equal(r.Claimants, []string{"alpha/api", "demo/api"}) {
		t.Errorf("contested /api %+v", r)
	}
	if r := byKey["app.example.test"]; r.State != RoutePublished || r.Owner != "demo/site" {
		t.Errorf("/ is not contested: %+v", r)
	}

	// Options differ during a Deploy that changes them: the serving
	// row's win, then the newest row's.
	older := row("a0", "m1", "demo", "api", "10.210.1.6", true, store.IngressRoute{Hostname: "app.example.test", Path: "/api", ContainerPort: 8080})
	older.Body.CreatedAt = 100
	newer := row("a2", "m1", "demo", "api", "10.210.1.7", false, api)
	newer.Body.CreatedAt = 200
	if r := Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{older, newer}, Machine: "m1"}).Routes[0]; r.StripPrefix || r.RedirectHTTPS != nil {
		t.Errorf("the ready row's options lost to a row not ready: %+v", r)
	}
	newer.Body.Ready = true
	if r := Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{older, newer}, Machine: "m1"}).Routes[0]; !r.StripPrefix || r.RedirectHTTPS == nil {
		t.Errorf("the newest ready row's options lost: %+v", r)
	}
}

// TestComputeRouteLimitsAndRules: a route carries its owner's body limit,
// response timeout, header rules (normalised again: a row is another
// Machine's word) and users; a row whose users do not check gets a route
// that admits nobody, never an open one, and a negative limit none.
func TestComputeRouteLimitsAndRules(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	good := store.IngressRoute{Hostname: "a.example.test", ContainerPort: 80, Options: routeopt.Options{MaxBodyBytes: 1 << 20, ResponseTimeoutMS: 1500,
		Headers:   &routeopt.Headers{Request: &routeopt.HeaderRules{Set: map[string]string{"x-env": "prod"}}},
		BasicAuth: &routeopt.BasicAuth{Users: map[string]string{"alice": string(hash)}}, Compress: true}}
	bad := store.IngressRoute{Hostname: "b.example.test", ContainerPort: 80, Options: routeopt.Options{MaxBodyBytes: -5,
		BasicAuth: &routeopt.BasicAuth{Users: map[string]string{"alice": "pw"}}}}
	got := Compute(Input{Machines: testMachines, Machine: "m1", Containers: []store.Row[store.ContainerBody]{
		row("a", "m1", "demo", "a", "10.210.1.2", true, good), row("b", "m1", "demo", "b", "10.210.1.3", true, bad)}}).ByKey()
	a, b := got["a.example.test"], got["b.example.test"]
	if a.MaxBodyBytes != 1<<20 || a.ResponseTimeoutMS != 1500 || a.Headers.Request.Set["X-Env"] != "prod" || a.BasicAuth.Users["alice"] != string(hash) || !a.Compress {
		t.Errorf("route a %+v", a)
	}
	if b.MaxBodyBytes != 0 || b.BasicAuth == nil || len(b.BasicAuth.Users) != 0 {
		t.Errorf("route b %+v: want no limit and nobody admitted", b)
	}
}

// TestComputeRedirectRoutes: a redirect_from route claims its hostname
// like any route (its own key, its owner's upstreams, a conflict keeps
// the previous owner, who keeps serving it as a plain route), carries its
// target normalised, and a row naming no single hostname as its target
// is skipped with the field.
func TestComputeRedirectRoutes(t *testing.T) {
	www := store.IngressRoute{Hostname: "www.example.test", ContainerPort: 8080, Options: routeopt.Options{RedirectTo: "Example.test."}}
	apex := store.IngressRoute{Hostname: "example.test", ContainerPort: 8080}
	web := row("a", "m1", "demo", "web", "10.210.1.2", true, apex, www)
	got := Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{web}, Machine: "m1"})
	if len(got.Routes) != 2 || len(got.Skipped) != 0 {
		t.Fatalf("routes %+v skipped %+v", got.Routes, got.Skipped)
	}
	r := got.ByKey()["www.example.test"]
	if r.Owner != "demo/web" || r.State != RoutePublished || r.RedirectTo != "example.test" || got.ByKey()["example.test"].RedirectTo != "" {
		t.Fatalf("redirect route %+v", r)
	}

	// Another Service already serving www keeps it: conflict, its options.
	site := row("b", "m1", "alpha", "site", "10.210.1.3", true, store.IngressRoute{Hostname: "www.example.test", ContainerPort: 80})
	first := Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{site}, Machine: "m1"})
	got = Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{site, web}, Machine: "m1", Prev: first.ByKey()})
	r = got.ByKey()["www.example.test"]
	if r.State != RouteConflict || r.Owner != "alpha/site" || r.RedirectTo != "" || !slices.Equal(r.Upstreams, []string{"10.210.1.3:80"}) {
		t.Fatalf("conflicting redirect %+v", r)
	}

	for _, to := range []string{"*.example.test", "bad_host!"} {
		bad := www
		bad.RedirectTo = to
		got := Compute(Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{row("c", "m1", "demo", "web", "10.210.1.2", true, bad)}, Machine: "m1"})
		if len(got.Routes) != 0 || len(got.Skipped) != 1 || !strings.Contains(got.Skipped[0].Reason, `"ingress[0].redirect_to"`) {
			t.Errorf("redirect_to %q: routes %+v skipped %+v", to, got.Routes, got.Skipped)
		}
	}
}
