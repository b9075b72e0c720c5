package render

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

// contains fails t for each of want that out lacks, runs of spaces (a
// table's padding) counting as one.
func contains(t *testing.T, what, out string, want ...string) {
	t.Helper()
	squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, w := range want {
		if !strings.Contains(squash(out), squash(w)) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// TestServiceTables: ls has a row per Service with its note, ps a row
// per Container with "-" for no health, and removal marks name the
// command that retries them.
func TestServiceTables(t *testing.T) {
	var b strings.Builder
	if err := Services(&b, []views.ServiceRow{{Namespace: "shop-production", Service: "web", Desired: "2", Running: 1, Ready: 1, Total: 1}}); err != nil {
		t.Fatal(err)
	}
	contains(t, "ls", b.String(), "NAMESPACE", "shop-production  web      2        1        1      1")
	b.Reset()
	rows := []client.ContainerRow{{Machine: "m1", ContainerObservation: rpc.ContainerObservation{Namespace: "shop-production", Service: "web", Name: "web-1", State: "running", Ready: true, IP: "10.0.0.2", Image: "app:1"}}}
	if err := Containers(&b, rows, time.Now()); err != nil {
		t.Fatal(err)
	}
	contains(t, "ps", b.String(), "LAST EXIT", "m1       shop-production  web      web-1      running  -       true")
	b.Reset()
	rows = append(rows, client.ContainerRow{Machine: "m2", Down: true, ContainerObservation: rpc.ContainerObservation{Namespace: "shop-production",
		Service: "web", Name: "0123456789ab", State: client.StateUnknown, ImageID: "sha256:feed"}})
	if err := Containers(&b, rows, time.Now()); err != nil {
		t.Fatal(err)
	}
	contains(t, "ps of a Down Machine's Container", b.String(), "m2 shop-production web 0123456789ab unknown (Machine down) - false 0 - - sha256:feed")
	b.Reset()
	RemovalMarks(&b, []operator.Removal{{Project: "shop", Environment: "staging", CreatedAt: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)}})
	contains(t, "marks", b.String(), "note: shop-staging has a pending removal since 2026-12-01 09:30; `ployz project rm shop --env staging` retries it")
}

// TestServiceInspection: the declaration, execution, ingress, Serving
// Pointer (acks and who is pending), Containers (on the Machine's
// name) and networks (with the Service's aliases on each) are each a line.
func TestServiceInspection(t *testing.T) {
	in := client.Inspection{Namespace: "shop-production", Service: "web", ServiceID: "svc1",
		Declared:  &client.Declaration{Mode: "replicated", Replicas: 2, Image: "app:1", Readiness: "http"},
		Execution: client.ExecutionStatus{Status: "degraded", Desired: 2, Running: 2, Ready: 1, NotReadyOn: []string{"m2"}},
		Ingress: client.IngressStatus{Status: "serving", Routes: []deploy.IngressRoute{{Hostname: "shop.test", ContainerPort: 8080}},
			Machines: []client.MachineRoutes{{Machine: "m1", Routes: []ingress.Route{{Hostname: "shop.test", State: "serving", Upstreams: []string{"10.0.0.2:8080"}}}}, {Machine: "m3", Error: "down"}}},
		Containers: []rpc.ContainerObservation{{Name: "web-1", MachineID: "id-m1", State: "running", Ready: true}},
		Networks: []client.ServiceNetwork{{Name: "shop-production", Namespaces: []string{"shop-production"}},
			{Name: "external:payments", Namespaces: []string{"bank-production", "shop-production"}, Aliases: []string{"pay", "shop-api"}}}}
	snap := deploy.Snapshot{Machines: []deploy.MachineState{{ID: "id-m1", Name: "m1"}}}
	var b strings.Builder
	if err := ServiceInspection(&b, in, snap, time.Now()); err != nil {
		t.Fatal(err)
	}
	contains(t, "inspect", b.String(), "declared      replicated, replicas 2, image app:1, readiness http",
		"execution     degraded (desired 2, running 2, ready 1, restarts 0)", "not ready on  m2", "ingress       serving",
		"route         shop.test -> :8080", "on m1         shop.test serving -> 10.0.0.2:8080", "on m3         unknown: down",
		"container     web-1 on m1: running, ready true", "network       shop-production (shared with the Services of shop-production on it)\n",
		"network       external:payments (shared with the Services of bank-production, shop-production on it); aliases pay, shop-api\n")
}

// TestIngressConfig: a Machine that did not answer, one whose proxy
// loaded nothing, and one with a route and its serving pointer.
func TestIngressConfig(t *testing.T) {
	ms := []client.MachineIngress{{Machine: "m1", MachineID: "id1", Error: "unreachable"},
		{Machine: "m2", MachineID: "id2", Status: &ingress.Status{LoadError: "bad"}},
		{Machine: "m3", MachineID: "id3", Status: &ingress.Status{Running: true, Listen: ":80", Loaded: 1, ConfigHash: "abc",
			Routes: []ingress.Route{{Hostname: "shop.test", Owner: "shop-production/web", State: "serving", Pointer: "p1"},
				{Hostname: "shop.test", Path: "/api", Options: routeopt.Options{StripPrefix: true, RedirectHTTPS: new(bool)}, Owner: "shop-production/api", State: "serving"},
				{Hostname: "admin.shop.test", Options: routeopt.Options{MaxBodyBytes: 10 << 20, ResponseTimeoutMS: 90000, Headers: &routeopt.Headers{},
					BasicAuth: &routeopt.BasicAuth{Users: map[string]string{"bob": "", "alice": ""}}, Compress: true}, Owner: "shop-production/admin", State: "serving"},
				{Hostname: "www.shop.test", Options: routeopt.Options{RedirectTo: "shop.test"}, Owner: "shop-production/web", State: "serving"}}}},
		{Machine: "m4", MachineID: "id4", Status: &ingress.Status{Off: true}}}
	var b strings.Builder
	if err := IngressConfig(&b, ms); err != nil {
		t.Fatal(err)
	}
	contains(t, "ingress config", b.String(), "machine m1 (id1)", "error    unreachable", "nothing loaded: caddy refused the config: bad",
		"loaded   1970-01-01T00:00:01Z, config abc, listen :80", "shop.test", "shop-production/web", "[serving pointer p1]",
		"shop.test/api (strip prefix, no https redirect)", "machine m4 (id4)", "off: this Machine does not accept ingress",
		"admin.shop.test (body up to 10MiB, response within 1m30s, header rules, gzip, basic auth (alice, bob))", "www.shop.test (308 to shop.test)")
}

// TestIngressDNS: the records as a table, private addresses flagged, and
// the notes after it.
func TestIngressDNS(t *testing.T) {
	d := client.IngressDNS{Records: []client.DNSRecord{{Name: "a.example.com", Type: "A", Value: "203.0.113.1", Machine: "m1"},
		{Name: "a.example.com", Type: "A", Value: "10.0.0.2", Machine: "m2", Private: true}}, Notes: []string{"m3 did not answer"}}
	var b strings.Builder
	if err := IngressDNS(&b, d); err != nil {
		t.Fatal(err)
	}
	contains(t, "ingress dns", b.String(), "NAME           TYPE  VALUE        MACHINE", "a.example.com  A     203.0.113.1  m1",
		"a.example.com  A     10.0.0.2     m2       (a private address", "note: m3 did not answer")
}

// TestMachineTables: inspect lists labels sorted and plugins; ls sorts
// by name, says who observed and names a refused row on errw; rtt shows
// each member.
func TestMachineTables(t *testing.T) {
	var b strings.Builder
	in := rpc.Inspection{ID: "0123456789", Name: "m1", Labels: map[string]string{"b": "2", "a": "1"},
		Plugins: []rpc.PluginView{{Name: "ployz-dns", Health: "failing", Error: "timeout", SHA256: "abcdef0123",
			StoreEventsDropped: map[string]int64{"serving": 2, "containers": 1}, RefusedContainerRows: 2}, {Name: "ployz-metrics"}},
		StoreEventsDropped: map[string]int64{"serving": 1, "containers": 3},
		Isolation:          &rpc.IsolationView{Generation: 3, ChangedAt: "2026-12-06T20:00:00Z", Networks: 2, Addresses: 5}}
	if err := Inspection(&b, in); err != nil {
		t.Fatal(err)
	}
	contains(t, "inspect", b.String(), "isolation             generation 3, changed 2026-12-06T20:00:00Z: 2 networks, 5 addresses", "a=1, b=2", "PLUGIN", "failing (timeout)", "abcdef01 ", "store events dropped  containers 3, serving 1",
		"plugin ployz-dns dropped store events: containers 1, serving 2 (duplicate or out of order; see its log)",
		"plugin ployz-dns refuses 2 containers rows: their Machine cannot vouch for the address")
	if strings.Contains(b.String(), "plugin ployz-metrics refuses") {
		t.Errorf("inspect names refusals of a plugin that reported none:\n%s", b.String())
	}
	if strings.Contains(b.String(), "plugin ployz-metrics dropped") {
		t.Errorf("inspect names drops of a plugin that reported none:\n%s", b.String())
	}
	b.Reset()
	var errw strings.Builder
	list := rpc.MachineList{ObserverName: "m1", Machines: []rpc.MachineView{{Name: "zeta", ID: "2"}, {Name: "alpha", ID: "1", Trust: "refused", TrustReason: "bad signature"}}}
	if err := Machines(&b, &errw, list); err != nil {
		t.Fatal(err)
	}
	if a, z := strings.Index(b.String(), "alpha"), strings.Index(b.String(), "zeta"); a < 0 || z < a {
		t.Errorf("not sorted by name:\n%s", b.String())
	}
	if list.Machines[0].Name != "zeta" {
		t.Error("the caller's list was reordered")
	}
	contains(t, "ls stderr", errw.String(), "observed by m1", "machines row of alpha (1) refused by m1: bad signature")
	b.Reset()
	if err := Membership(&b, rpc.Membership{Members: []rpc.Member{{MachineName: "m2", MachineID: "0123456789", Addr: "10.0.0.2", State: "alive", RTTMillis: 1.5}}}); err != nil {
		t.Fatal(err)
	}
	contains(t, "rtt", b.String(), "m2       01234567  10.0.0.2  alive  1.50ms")
}

// TestUpgradeRender: a push over SSH, a step going back and a failed
// Machine are lines; the plan and outcome are tables.
func TestUpgradeRender(t *testing.T) {
	var lines []string
	h := UpgradeHooks(func(f string, a ...any) { lines = append(lines, strings.TrimSpace(sprintf(f, a...))) }, "b.tar.gz")
	a := release.Action{Name: "m1", From: "1.0", To: "1.1"}
	h.Pushing(a, "ssh://m1")
	h.Step(a, rpc.UpgradeStep{Name: "daemon", Release: "1.1", Outcome: "failed", Millis: 5, Rollback: true, Detail: "unhealthy"})
	h.Done(release.MachineOutcome{Name: "m1", Outcome: "rolled_back", FailedStep: "daemon", Error: "unhealthy", Millis: 1500})
	contains(t, "hooks", strings.Join(lines, "\n"), "m1: pushing b.tar.gz over SSH (ssh://m1; 1.0 → 1.1)",
		"m1: daemon → 1.1 failed in 5ms (going back): unhealthy", "m1: rolled_back at step daemon: unhealthy (1.5s)")
	var b strings.Builder
	if err := UpgradePlan(&b, []release.Action{{Name: "m1", MachineID: "0123456789", From: "1.0", To: "1.1", Do: "upgrade"}}); err != nil {
		t.Fatal(err)
	}
	contains(t, "plan", b.String(), "1      m1    01234567  1.0   1.1  upgrade")
	b.Reset()
	if err := UpgradeOutcome(&b, release.Outcome{Machines: []release.MachineOutcome{{Name: "m1", Outcome: "upgraded", Millis: 2000}}}); err != nil {
		t.Fatal(err)
	}
	contains(t, "outcome", b.String(), "m1", "upgraded  -            2.0s")
}

// TestMetricsChart: a Machine's series is a sparkline with last, min
// and max in its unit, its gaps are named, and a Machine without an
// answer is a warning.
func TestMetricsChart(t *testing.T) {
	ms := []observe.MachineMetrics{{Machine: "m1", Answer: &rpc.MetricsAnswer{ResolutionSeconds: 10,
		Series: []rpc.MetricSeries{{Metric: "mem.bytes", Subject: rpc.MetricSubject{Service: "web"}, Points: []rpc.MetricPoint{{Time: 10, Value: 1024}, {Time: 20, Value: 2048}}}},
		Gaps:   []rpc.MetricGap{{From: 0, To: 5, Metric: "cpu.cores", Reason: "restart"}}}}, {Machine: "m2", Error: "down"}}
	var out, errw strings.Builder
	Metrics(&out, &errw, ms, 0, 40)
	contains(t, "chart", out.String(), "web", "mem.bytes", "last 2.0KiB", "min 1.0KiB", "max 2.0KiB", "the whole Machine cpu.cores: restart")
	contains(t, "warnings", errw.String(), "warning: machine m2 did not answer: down")
}

func sprintf(f string, a ...any) string { return fmt.Sprintf(f, a...) }

// TestDeliveryTable: a push's table has a row per Machine with what it
// already held and why a delivery failed.
func TestDeliveryTable(t *testing.T) {
	var b strings.Builder
	DeliveryTable(&b, []images.Result{{MachineName: "m1", Outcome: "pushed", Bytes: 100, SkippedLayers: 2}, {MachineName: "m2", Outcome: "failed", Error: "disk full"}})
	contains(t, "deliveries", b.String(), "MACHINE OUTCOME BYTES LAYERS HELD ERROR", "m1 pushed 100 2", "m2 failed 0 0 disk full")
}

// TestDeploysTable: a stale running Deploy says since when its CLI went
// quiet, Machines are sorted with their steps in flight, and an
// unreadable record is a warning.
func TestDeploysTable(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.Local)
	recs := []deploy.Record{{DeploymentID: "d1", Namespace: "shop-production", Revision: 3, Status: "running", Stale: true, UpdatedAt: at, StartedAt: at,
		Machines: []deploy.MachineRecord{{Machine: "m2", Status: "running", InFlight: []string{"web create_container web-3"}}, {Machine: "m1", Status: "completed"}}}}
	var b strings.Builder
	Deploys(&b, recs, []string{"d0"})
	contains(t, "deploys", b.String(), "d1 shop-production 3 running (no word from its CLI since 09:00:00) 2026-12-01 09:00:00",
		"m1 completed; m2 running: web create_container web-3", "warning: the record of deploy d0 is unreadable by this version")
}

// TestUnobservedNamesDownApart: a Down Machine is named as Down, with
// what follows from it; another unobserved Machine keeps its reason.
func TestUnobservedNamesDownApart(t *testing.T) {
	snap := deploy.Snapshot{
		Machines: []deploy.MachineState{{ID: "id2", Name: "m2", Membership: deploy.MembershipDown}, {ID: "id3", Name: "m3", Membership: "up"}},
		Missing:  []deploy.Unobserved{{MachineID: "id2", Name: "m2", Reason: "timeout"}, {MachineID: "id3", Name: "m3", Reason: "refused"}},
	}
	var b strings.Builder
	Unobserved(&b, snap)
	contains(t, "unobserved", b.String(), "warning: Down: m2: unreachable", "restore-replicas", "warning: not observed: m3 (refused)")
	if strings.Contains(b.String(), "m2 (timeout)") {
		t.Errorf("the Down Machine is also listed as merely unobserved:\n%s", b.String())
	}
	b.Reset()
	Unobserved(&b, deploy.Snapshot{})
	if b.Len() != 0 {
		t.Errorf("a complete snapshot printed %q", b.String())
	}
}

// TestBuiltImages: a tag line per built Service, then the deliveries
// only after a push.
func TestBuiltImages(t *testing.T) {
	var b strings.Builder
	web := deploy.Service{Name: "web"}
	web.Spec.Image = "shop-web:abc"
	BuiltImages(&b, client.BuiltImages{Services: []deploy.Service{web}})
	if b.String() != "web\tshop-web:abc\n" {
		t.Fatalf("no push: %q", b.String())
	}
	BuiltImages(&b, client.BuiltImages{Services: []deploy.Service{web}, Deliveries: []images.Result{{MachineName: "m1", Outcome: "delivered"}}})
	contains(t, "after a push", b.String(), "web\tshop-web:abc\nweb\tshop-web:abc\n", "m1")
}
