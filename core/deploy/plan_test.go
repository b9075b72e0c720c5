package deploy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

const ns = "hello-production"

func svc(name string, replicas int, mut ...func(*Service)) Service {
	s := Service{Name: name, Mode: ModeReplicated, Replicas: replicas,
		Spec: rpc.ContainerSpec{Namespace: ns, Service: name, Kind: "service", Image: "ployz-testapp:latest", Readiness: ReadyNone, Restart: "unless-stopped"}}
	for _, m := range mut {
		m(&s)
	}
	return s
}

// hashOf is the spec hash a plan stamps on s's Containers.
func hashOf(s Service) string {
	spec := s.Spec
	spec.Namespace, spec.Service = ns, s.Name
	return SpecHash(spec)
}

func machine(name string, labels map[string]string, cs ...rpc.ContainerObservation) MachineState {
	m := MachineState{ID: "id-" + name, Name: name, Labels: labels, Observed: true, ImagesKnown: true, Images: []string{"ployz-testapp:latest"}}
	for i, c := range cs {
		c.MachineID = m.ID
		if c.ID == "" {
			c.ID = fmt.Sprintf("%s-c%d", name, i)
			c.Name = c.ID
		}
		m.Containers = append(m.Containers, c)
	}
	return m
}

func ctr(service, hash, state string) rpc.ContainerObservation {
	return rpc.ContainerObservation{Namespace: ns, Service: service, ServiceID: "sid-" + service, SpecHash: hash, State: state}
}

func snapOf(ms ...MachineState) Snapshot { return Snapshot{Machines: ms} }

func app(svcs ...Service) App {
	return App{Project: "hello", Environment: "production", Services: svcs}
}

// summary renders rows as "machine service op" lines, sorted.
func summary(p Plan) string {
	var out []string
	for _, r := range p.Rows {
		s := r.Machine + " " + r.Service + " " + r.Op
		if r.Strategy != "" {
			s += " " + r.Strategy
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func lines(ls ...string) string { sort.Strings(ls); return strings.Join(ls, "\n") }

func TestPlan(t *testing.T) {
	web := svc("web", 3)
	eu := func(s *Service) { s.Constraints = []rpc.Constraint{{Label: "region", Op: "==", Value: "eu"}} }
	vol := func(s *Service) {
		s.Volumes = []string{ns + "-data"}
		s.Spec.Mounts = []rpc.MountSpec{{Type: "volume", Source: ns + "-data", Target: "/data"}}
	}
	three := func(cs1, cs2, cs3 []rpc.ContainerObservation) Snapshot {
		return snapOf(machine("m1", map[string]string{"region": "eu"}, cs1...), machine("m2", map[string]string{"region": "us"}, cs2...), machine("m3", map[string]string{"region": "eu"}, cs3...))
	}
	none := []rpc.ContainerObservation(nil)
	cases := []struct {
		name string
		app  App
		snap Snapshot
		want string
	}{
		{"spread over empty Machines", app(web), three(none, none, none),
			lines("m1 web create", "m2 web create", "m3 web create")},
		{"spread fills the emptiest first", app(svc("web", 2), svc("api", 1)),
			three([]rpc.ContainerObservation{ctr("api", hashOf(svc("api", 1)), "running")}, none, none),
			lines("m1 api unchanged", "m2 web create", "m3 web create")},
		{"global one per eligible Machine", app(svc("agent", 0, func(s *Service) { s.Mode = ModeGlobal }, eu)), three(none, none, none),
			lines("m1 agent create", "m3 agent create")},
		{"constraint", app(svc("web", 2, eu)), three(none, none, none),
			lines("m1 web create", "m3 web create")},
		{"max_per_machine", app(svc("web", 2, eu, func(s *Service) { s.MaxPerMachine = 1 })),
			three([]rpc.ContainerObservation{ctr("web", hashOf(svc("web", 2, eu)), "running")}, none, none),
			lines("m1 web unchanged", "m3 web create")},
		{"unchanged by spec hash", app(web),
			three([]rpc.ContainerObservation{ctr("web", hashOf(web), "running")}, []rpc.ContainerObservation{ctr("web", hashOf(web), "running")}, []rpc.ContainerObservation{ctr("web", hashOf(web), "running")}),
			lines("m1 web unchanged", "m2 web unchanged", "m3 web unchanged")},
		{"changed spec replaces start-first", app(svc("web", 2)),
			three([]rpc.ContainerObservation{ctr("web", "old", "running")}, []rpc.ContainerObservation{ctr("web", hashOf(svc("web", 2)), "running")}, none),
			lines("m1 web replace start-first", "m2 web unchanged")},
		{"host port means stop-first", app(svc("web", 1, func(s *Service) { s.HostPorts = []int{80} })),
			three([]rpc.ContainerObservation{ctr("web", "old", "running")}, none, none),
			"m1 web replace stop-first"},
		{"single replica with volume means stop-first and stays put", app(svc("db", 1, vol)),
			snapOf(machine("m1", nil), machine("m2", nil, ctr("db", "old", "running")), machine("m3", nil)),
			"m2 db replace stop-first"},
		{"volume locality for a new Container", app(svc("db", 1, vol)),
			func() Snapshot {
				s := snapOf(machine("m1", nil), machine("m2", nil), machine("m3", nil))
				s.Machines[2].Volumes = []string{ns + "-data"}
				return s
			}(),
			"m3 db create"},
		{"up to date but stopped is started", app(svc("web", 1)),
			three([]rpc.ContainerObservation{ctr("web", hashOf(svc("web", 1)), "exited")}, none, none),
			"m1 web start"},
		{"replicas 0 stops and keeps", app(svc("web", 0)),
			three([]rpc.ContainerObservation{ctr("web", "x", "running")}, []rpc.ContainerObservation{ctr("web", "x", "exited")}, none),
			lines("m1 web stop", "m2 web unchanged")},
		{"scale down removes surplus", app(svc("web", 1)),
			three([]rpc.ContainerObservation{ctr("web", hashOf(svc("web", 1)), "running")}, []rpc.ContainerObservation{ctr("web", hashOf(svc("web", 1)), "running")}, none),
			lines("m1 web unchanged", "m2 web remove")},
		{"ineligible Machine's Container moves", app(svc("web", 1, eu)),
			three(none, []rpc.ContainerObservation{ctr("web", hashOf(svc("web", 1, eu)), "running")}, none),
			lines("m1 web create", "m2 web remove")},
		{"rerun after a failed replacement: serving old ones are replaced again, the failed new one removed", app(svc("web", 2)),
			three([]rpc.ContainerObservation{ctr("web", "old", "running"), ctr("web", hashOf(svc("web", 2)), "exited")}, []rpc.ContainerObservation{ctr("web", "old", "running")}, none),
			lines("m1 web replace start-first", "m2 web replace start-first", "m1 web remove")},
		{"keeping spreads: surplus goes from the busiest Machine", app(svc("web", 2)),
			three([]rpc.ContainerObservation{ctr("web", hashOf(svc("web", 2)), "running"), ctr("web", hashOf(svc("web", 2)), "running")}, []rpc.ContainerObservation{ctr("web", hashOf(svc("web", 2)), "running")}, none),
			lines("m1 web unchanged", "m1 web remove", "m2 web unchanged")},
		{"creates of earlier services count for spread", app(svc("a", 1), svc("b", 1)),
			snapOf(machine("m1", nil), machine("m2", nil)),
			lines("m1 a create", "m2 b create")},
		{"global with a volume replaces stop-first", app(svc("agent", 0, func(s *Service) { s.Mode = ModeGlobal }, vol)),
			snapOf(machine("m1", nil, ctr("agent", "old", "running"))),
			"m1 agent replace stop-first"},
		{"prune with a complete snapshot", app(svc("web", 1)),
			three([]rpc.ContainerObservation{ctr("web", hashOf(svc("web", 1)), "running"), ctr("old", "x", "running")}, none, none),
			lines("m1 web unchanged", "m1 old remove")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := MakePlan(c.app, c.snap, PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(p); got != c.want {
				t.Fatalf("rows:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	snap := snapOf(machine("m1", map[string]string{"region": "eu"}), machine("m2", map[string]string{"region": "us"}))
	cases := []struct {
		name string
		s    Service
		snap Snapshot
		want string
	}{
		{"unknown label", svc("web", 1, func(s *Service) { s.Constraints = []rpc.Constraint{{Label: "gpu", Op: "==", Value: "yes"}} }), snap,
			`service "web": x-placement constraint gpu==yes: no observed Machine has label "gpu"`},
		{"the constraint that emptied the set", svc("web", 1, func(s *Service) {
			s.Constraints = []rpc.Constraint{{Label: "region", Op: "!=", Value: "us"}, {Label: "region", Op: "==", Value: "us"}}
		}), snap, `x-placement constraint region==us leaves no eligible Machine (of m1)`},
		{"max_per_machine too small", svc("web", 3, func(s *Service) { s.MaxPerMachine = 1 }), snap,
			`replicas 3: max_per_machine 1 allows only 2`},
		{"image missing everywhere, pull never", svc("web", 2, func(s *Service) { s.Spec.Image = "nope:1"; s.PullPolicy = PullNever }), snap,
			`image nope:1 is missing on every target Machine (m1, m2)`},
		{"volume held where constraints exclude", svc("db", 1, func(s *Service) {
			s.Volumes = []string{"v"}
			s.Constraints = []rpc.Constraint{{Label: "region", Op: "==", Value: "eu"}}
		}), func() Snapshot {
			s := snapOf(snap.Machines...)
			s.Machines = append([]MachineState{}, snap.Machines...)
			s.Machines[1].Volumes = []string{"v"}
			return s
		}(),
			`volume locality: volume v is on m2`},
	}
	for _, c := range cases {
		_, err := MakePlan(app(c.s), c.snap, PlanOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestPlanImageMissingOnSomeWarns(t *testing.T) {
	s := snapOf(machine("m1", nil), machine("m2", nil))
	s.Machines[1].Images = nil
	p, err := MakePlan(app(svc("web", 2)), s, PlanOptions{Pull: PullNever})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "missing on m2") {
		t.Fatalf("warnings = %v", p.Warnings)
	}
}

func TestPlanPruneRefusedOnIncompleteSnapshot(t *testing.T) {
	s := snapOf(machine("m1", nil, ctr("old", "x", "running")), machine("m2", nil))
	s.Machines[1].Observed = false
	s.Missing = []Unobserved{{MachineID: "id-m2", Name: "m2", Reason: "timeout"}}
	p, err := MakePlan(app(svc("web", 2)), s, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != lines("m1 web create", "m1 web create") {
		t.Fatalf("rows:\n%s", got)
	}
	if p.PruneRefused == "" || !strings.Contains(p.PruneRefused, "m2 (timeout)") {
		t.Fatalf("prune refusal = %q", p.PruneRefused)
	}
}

func TestPlanUnobservedMachineContainersUntouched(t *testing.T) {
	s := snapOf(machine("m1", nil), machine("m2", nil, ctr("web", "x", "running")))
	s.Machines[1].Observed = false
	s.Missing = []Unobserved{{MachineID: "id-m2", Name: "m2", Reason: "down"}}
	p, err := MakePlan(app(svc("web", 1)), s, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != "m1 web create" {
		t.Fatalf("rows:\n%s", got)
	}
}

func TestPlanHooksComeFirstAndOnlyOnChange(t *testing.T) {
	hook := func(s *Service) {
		s.Hooks = []Hook{{Command: []string{"/app", "migrate"}, Environment: map[string]string{"X": "1"}}}
	}
	p, err := MakePlan(app(svc("api", 2, hook)), snapOf(machine("m1", nil), machine("m2", nil)), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Rows[0].Op != OpHook || p.Rows[1].Op != OpCreate || p.Rows[0].MachineID != p.Rows[1].MachineID {
		t.Fatalf("rows = %+v", p.Rows)
	}
	h := p.Rows[0].Spec
	if h.Kind != "hook" || h.Entrypoint[0] != "/app" || h.Command[0] != "migrate" || h.Env["X"] != "1" || h.Restart != "no" || p.Rows[0].HookTimeoutSeconds != 300 {
		t.Fatalf("hook spec = %+v", h)
	}
	up := svc("api", 2, hook)
	p, err = MakePlan(app(up), snapOf(machine("m1", nil, ctr("api", hashOf(up), "running")), machine("m2", nil)), PlanOptions{})
	if err != nil || summary(p) != "m1 api unchanged\nm2 api create" {
		t.Fatalf("a scale-up of a running spec ran a hook: %v\n%s", err, summary(p))
	}
}

func TestPlanKeepsServiceIDAndStampsSpec(t *testing.T) {
	s := svc("web", 2)
	p, err := MakePlan(app(s), snapOf(machine("m1", nil, ctr("web", "old", "running")), machine("m2", nil)), PlanOptions{DeploymentID: "dep1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Rows {
		if r.Spec.ServiceID != "sid-web" || r.Spec.DeploymentID != "dep1" || r.Spec.SpecHash != hashOf(s) {
			t.Fatalf("row spec = %+v", r.Spec)
		}
		if !strings.HasPrefix(r.NewName, ns+"-web-") || len(r.NewName) != len(ns+"-web-")+4 {
			t.Fatalf("name = %q", r.NewName)
		}
	}
	if p.Services[0].ServiceID != "sid-web" {
		t.Fatalf("summary = %+v", p.Services)
	}
}

func TestSpecHashIgnoresDeploymentFields(t *testing.T) {
	a := rpc.ContainerSpec{Image: "x", Env: map[string]string{"A": "1", "B": "2"}}
	b := a
	b.DeploymentID, b.ServiceID, b.SpecHash = "d", "s", "h"
	if SpecHash(a) != SpecHash(b) {
		t.Fatal("hash depends on per-deploy fields")
	}
	b.Env = map[string]string{"A": "1"}
	if SpecHash(a) == SpecHash(b) {
		t.Fatal("hash ignores env")
	}
}

func TestPlanHoldsReplicasThatMayRunOnUnobservedMachines(t *testing.T) {
	web := svc("web", 2, func(s *Service) { s.MaxPerMachine = 1 })
	s := snapOf(machine("m1", nil, ctr("web", hashOf(web), "running")), machine("m2", nil))
	s.Machines[1].Observed = false
	s.Missing = []Unobserved{{MachineID: "id-m2", Name: "m2", Reason: "partitioned"}}
	p, err := MakePlan(app(web), s, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if summary(p) != "m1 web unchanged" || len(p.Unplaced()) != 1 || !strings.Contains(p.Unplaced()[0], "m2 (partitioned)") {
		t.Fatalf("rows:\n%s\nunplaced %v", summary(p), p.Unplaced())
	}
}

func TestPlanHoldsVolumeServiceWhenItsVolumeMayBeUnobserved(t *testing.T) {
	db := svc("db", 1, func(s *Service) { s.Volumes = []string{ns + "-data"} })
	s := snapOf(machine("m1", nil), machine("m2", nil))
	s.Machines[1].Observed = false
	s.Missing = []Unobserved{{MachineID: "id-m2", Name: "m2", Reason: "down"}}
	p, err := MakePlan(app(db), s, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != 0 || len(p.Unplaced()) != 1 || !strings.Contains(p.Unplaced()[0], "held") {
		t.Fatalf("rows %+v unplaced %v", p.Rows, p.Unplaced())
	}
}

func TestPlanWarnsOfClaimedRoutes(t *testing.T) {
	other := rpc.ContainerObservation{Namespace: "shop-production", Service: "site", State: "running",
		Spec: &rpc.ContainerSpec{Ingress: []rpc.IngressRoute{{Hostname: "hello.example.test", ContainerPort: 80}}}}
	web := svc("web", 1, func(s *Service) {
		s.Ingress = []IngressRoute{{Hostname: "hello.example.test", ContainerPort: 8080}}
	})
	app := App{Project: "hello", Environment: "production", Services: []Service{web}}
	p, err := MakePlan(app, snapOf(machine("m1", nil, other)), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(p.Warnings, "\n"); !strings.Contains(w, "hello.example.test is already claimed by shop-production/site") {
		t.Fatalf("warnings: %s", w)
	}
	// A path of the same hostname is a route of its own; the same path is
	// claimed again.
	other.Spec.Ingress[0].Path = "/api"
	web.Ingress = []IngressRoute{{Hostname: "hello.example.test", ContainerPort: 8080}, {Hostname: "hello.example.test", Path: "/api", ContainerPort: 8081}}
	web.Spec.Ingress = nil
	app.Services = []Service{web}
	caps := machine("m1", nil, other)
	caps.Capabilities = []string{rpc.CapContainerRoutes, ingress.CapHTTP, ingress.CapRoutes}
	if p, err = MakePlan(app, snapOf(caps), PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(p.Warnings, "\n"); strings.Count(w, "already claimed") != 1 || !strings.Contains(w, "hello.example.test/api is already claimed by shop-production/site") {
		t.Fatalf("warnings with paths: %s", w)
	}
}

// TestPlanRouteOptionsNeedCapabilities: a Service with a path route runs
// only on Machines whose release carries the path into its rows, and the
// plan is refused while a Machine that accepts ingress runs an Ingress
// Proxy without path routes; one advertising no ingress at the moment is
// a warning, one without ingress nothing. A plain route needs neither.
func TestPlanRouteOptionsNeedCapabilities(t *testing.T) {
	with := func(m MachineState, caps ...string) MachineState { m.Capabilities = caps; return m }
	newest := []string{rpc.CapContainerRoutes, ingress.CapHTTP, ingress.CapRoutes}
	web := svc("web", 2, func(s *Service) {
		s.Ingress = []IngressRoute{{Hostname: "app.example.test", Path: "/api", ContainerPort: 8080}}
	})
	snap := snapOf(with(machine("m1", nil), newest...), with(machine("m2", nil), ingress.CapHTTP, ingress.CapRoutes))
	p, err := MakePlan(app(web), snap, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != "m1 web create\nm1 web create" {
		t.Errorf("rows:\n%s\nwant both on m1, the Machine that carries route paths", got)
	}
	if _, err := MakePlan(app(web), snapOf(with(machine("m2", nil), ingress.CapHTTP, ingress.CapRoutes)), PlanOptions{}); err == nil ||
		!strings.Contains(err.Error(), rpc.CapContainerRoutes) || !strings.Contains(err.Error(), "m2") {
		t.Errorf("no Machine carries route paths: %v", err)
	}

	old := with(machine("m3", nil), rpc.CapContainerRoutes, ingress.CapHTTP)
	if _, err := MakePlan(app(web), snapOf(with(machine("m1", nil), newest...), old), PlanOptions{}); err == nil ||
		!strings.Contains(err.Error(), "Ingress Proxy of m3") || !strings.Contains(err.Error(), ingress.CapRoutes) {
		t.Errorf("an older Ingress Proxy: %v", err)
	}
	old.Labels = map[string]string{rpc.MachineLabelAccepts: rpc.AcceptServices}
	if _, err := MakePlan(app(web), snapOf(with(machine("m1", nil), newest...), old), PlanOptions{}); err != nil {
		t.Errorf("a Machine without ingress refused the plan: %v", err)
	}
	p, err = MakePlan(app(web), snapOf(with(machine("m1", nil), newest...), with(machine("m4", nil), rpc.CapContainerRoutes)), PlanOptions{})
	if err != nil || !strings.Contains(strings.Join(p.Warnings, "\n"), "Ingress Proxy of m4 serves them is unknown") {
		t.Errorf("an Ingress Proxy advertising nothing: %v %v", err, p.Warnings)
	}

	plain := svc("web", 1, func(s *Service) { s.Ingress = []IngressRoute{{Hostname: "app.example.test", ContainerPort: 8080}} })
	if _, err := MakePlan(app(plain), snapOf(machine("m5", nil)), PlanOptions{}); err != nil {
		t.Errorf("a plain route on an older Machine: %v", err)
	}
}

// TestPlanRedirectsNeedCapabilities: a Service with a redirect_from route
// runs only on Machines whose release carries redirect_to into its rows,
// and the plan is refused while a Machine that accepts ingress runs an
// Ingress Proxy that would proxy the redirecting hostname instead; the
// redirecting name is claimed like any route.
func TestPlanRedirectsNeedCapabilities(t *testing.T) {
	with := func(m MachineState, caps ...string) MachineState { m.Capabilities = caps; return m }
	routes := []string{rpc.CapContainerRoutes, ingress.CapHTTP, ingress.CapRoutes}
	newest := append(slices.Clone(routes), rpc.CapContainerRedirects, ingress.CapRedirects)
	web := svc("web", 2, func(s *Service) {
		www := IngressRoute{Hostname: "www.example.test", ContainerPort: 8080}
		www.RedirectTo = "example.test"
		s.Ingress = []IngressRoute{{Hostname: "example.test", ContainerPort: 8080}, www}
	})
	// m2 serves redirects in its proxy but would drop redirect_to from rows.
	p, err := MakePlan(app(web), snapOf(with(machine("m1", nil), newest...), with(machine("m2", nil), append(slices.Clone(routes), ingress.CapRedirects)...)), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != "m1 web create\nm1 web create" {
		t.Errorf("rows:\n%s\nwant both on m1, the Machine that carries redirects", got)
	}
	if _, err := MakePlan(app(web), snapOf(with(machine("m2", nil), append(slices.Clone(routes), ingress.CapRedirects)...)), PlanOptions{}); err == nil ||
		!strings.Contains(err.Error(), rpc.CapContainerRedirects) || !strings.Contains(err.Error(), "www.example.test") {
		t.Errorf("no Machine carries redirects: %v", err)
	}
	old := with(machine("m3", nil), routes...)
	if _, err := MakePlan(app(web), snapOf(with(machine("m1", nil), newest...), old), PlanOptions{}); err == nil ||
		!strings.Contains(err.Error(), "Ingress Proxy of m3") || !strings.Contains(err.Error(), ingress.CapRedirects) || !strings.Contains(err.Error(), "redirect_from") {
		t.Errorf("an older Ingress Proxy: %v", err)
	}

	// A redirecting name another Service serves is claimed like any
	// hostname: the plan warns that the other keeps it.
	site := rpc.ContainerObservation{Namespace: "shop-production", Service: "site", State: "running",
		Spec: &rpc.ContainerSpec{Ingress: []rpc.IngressRoute{{Hostname: "www.example.test", ContainerPort: 80}}}}
	p, err = MakePlan(app(web), snapOf(with(machine("m1", nil, site), newest...)), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(p.Warnings, "\n"); !strings.Contains(w, "www.example.test is already claimed by shop-production/site") {
		t.Errorf("warnings: %s", w)
	}
}

// TestPlanUpstreamProtocolNeedsCapabilities: upstream_protocol, which an
// ingress of the release before it ignores, refuses the plan naming the
// Machine and the field while a Machine accepting ingress runs such an
// ingress, and passes once every one advertises it; the Containers go
// only where the row carries the field.
func TestPlanUpstreamProtocolNeedsCapabilities(t *testing.T) {
	with := func(m MachineState, caps ...string) MachineState { m.Capabilities = caps; return m }
	routes := []string{rpc.CapContainerRoutes, ingress.CapHTTP, ingress.CapRoutes, ingress.CapRedirects}
	newest := append(slices.Clone(routes), rpc.CapContainerUpstreamProtocol, ingress.CapUpstreamProtocol)
	grpc := IngressRoute{Hostname: "api.example.test", ContainerPort: 50051}
	grpc.UpstreamProtocol = "h2c"
	web := svc("web", 2, func(s *Service) { s.Ingress = []IngressRoute{grpc} })

	old := with(machine("edge-old", nil), routes...)
	_, err := MakePlan(app(web), snapOf(with(machine("m1", nil), newest...), old), PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "Ingress Proxy of edge-old") || !strings.Contains(err.Error(), "upstream_protocol") ||
		!strings.Contains(err.Error(), ingress.CapUpstreamProtocol) || strings.Contains(err.Error(), "m1") {
		t.Fatalf("an ingress without upstream_protocol: %v", err)
	}
	if !strings.Contains(err.Error(), "an older release; upgrade it") {
		t.Errorf("upstream_protocol's refusal gives no reason: %v", err)
	}
	// tls on_demand: a current proxy lacks it while HTTPS is off there
	// (a Machine just added), and the refusal says so, not only "older".
	od := IngressRoute{Hostname: "*.od.example.test", ContainerPort: 8080}
	od.TLS = routeopt.TLSOnDemand
	shop := svc("shop", 1, func(s *Service) { s.Ingress = []IngressRoute{od} })
	withOD := append(slices.Clone(routes), rpc.CapContainerTLSOnDemand, ingress.CapTLSOnDemand)
	_, err = MakePlan(app(shop), snapOf(with(machine("m1", nil), withOD...), with(machine("fresh", nil), routes...)), PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "Ingress Proxy of fresh") || !strings.Contains(err.Error(), "HTTPS is not on there (yet") {
		t.Errorf("tls on_demand without the proxy's capability: %v", err)
	}
	// The same ingress Machine once upgraded (its proxy advertises the
	// capability, its rows still lack it): the plan passes, the
	// Containers go to m1.
	p, err := MakePlan(app(web), snapOf(with(machine("m1", nil), newest...), with(machine("edge-old", nil), append(slices.Clone(routes), ingress.CapUpstreamProtocol)...)), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != "m1 web create\nm1 web create" {
		t.Errorf("rows:\n%s\nwant both on m1, the Machine that carries upstream_protocol", got)
	}
	if _, err := MakePlan(app(web), snapOf(with(machine("m2", nil), append(slices.Clone(routes), ingress.CapUpstreamProtocol)...)), PlanOptions{}); err == nil ||
		!strings.Contains(err.Error(), rpc.CapContainerUpstreamProtocol) || !strings.Contains(err.Error(), "upstream_protocol") {
		t.Errorf("no Machine carries upstream_protocol: %v", err)
	}
	// Without the field the older ingress is fine.
	web.Ingress[0].UpstreamProtocol = ""
	if _, err := MakePlan(app(web), snapOf(with(machine("m1", nil), newest...), old), PlanOptions{}); err != nil {
		t.Errorf("a route without upstream_protocol: %v", err)
	}
}

// TestIngressAdvertisesOptionCapabilities: the ingress plugin advertises
// the capability of each option gate, so a current Cluster never refuses
// its own routes.
func TestIngressAdvertisesOptionCapabilities(t *testing.T) {
	caps := ingress.Capabilities(&ingress.Spec{ACME: &ingress.ACMESpec{}})
	for _, g := range optionGates {
		if !slices.Contains(caps, g.proxy) {
			t.Errorf("ingress.Capabilities lacks %s (%s)", g.proxy, g.field)
		}
	}
}

func TestPlanRestartReplacesUpToDateContainers(t *testing.T) {
	web, db := svc("web", 2), svc("db", 1, func(s *Service) {
		s.Volumes = []string{ns + "-data"}
		s.Spec.Mounts = []rpc.MountSpec{{Type: "volume", Source: ns + "-data", Target: "/data"}}
	})
	snap := snapOf(
		machine("m1", nil, ctr("web", hashOf(web), "running"), ctr("db", hashOf(db), "running")),
		machine("m2", nil, ctr("web", hashOf(web), "exited")))
	p, err := MakePlan(app(web, db), snap, PlanOptions{Restart: []string{"web", "db"}})
	if err != nil {
		t.Fatal(err)
	}
	// The running ones are replaced (the single db Container on its volume
	// stop-first); the exited one is started as any deploy would.
	want := lines("m1 web replace start-first", "m2 web start", "m1 db replace stop-first")
	if got := summary(p); got != want {
		t.Fatalf("rows:\n%s\nwant:\n%s", got, want)
	}
	for _, r := range p.Rows {
		if r.Op == OpReplace && !strings.Contains(r.Reason, "requested restart") {
			t.Errorf("%s %s: reason %q", r.Machine, r.Service, r.Reason)
		}
	}
	p, err = MakePlan(app(web, db), snap, PlanOptions{Restart: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != lines("m1 web replace start-first", "m2 web start", "m1 db unchanged") {
		t.Fatalf("restart of web alone:\n%s", got)
	}
}

func TestPlanDrainedMachine(t *testing.T) {
	web := svc("web", 2)
	db := svc("db", 1, func(s *Service) {
		s.Volumes = []string{ns + "-data"}
		s.Spec.Mounts = []rpc.MountSpec{{Type: "volume", Source: ns + "-data", Target: "/data"}}
	})
	agent := svc("agent", 0, func(s *Service) { s.Mode = ModeGlobal })
	drained := map[string]string{LabelDrained: "2026-12-01T00:00:00Z"}
	m2 := machine("m2", drained, ctr("web", hashOf(web), "running"), ctr("db", hashOf(db), "running"), ctr("agent", hashOf(agent), "running"))
	m2.Volumes = []string{ns + "-data"}
	snap := snapOf(machine("m1", nil, ctr("web", hashOf(web), "running"), ctr("agent", hashOf(agent), "running")), m2, machine("m3", nil))
	p, err := MakePlan(app(web, db, agent), snap, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// web and agent leave m2 (web's replacement goes to m3); db, whose
	// volume is local to m2, stays and says so; nothing new lands on m2.
	want := lines("m1 web unchanged", "m3 web create", "m2 web remove", "m2 db unchanged",
		"m1 agent unchanged", "m3 agent create", "m2 agent remove")
	if got := summary(p); got != want {
		t.Fatalf("rows:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), `service "db" stays on drained m2: volume `+ns+"-data is local to it") {
		t.Fatalf("warnings: %q", p.Warnings)
	}
	// Every Machine drained and nothing running: a clear refusal.
	all := snapOf(machine("m1", drained), machine("m2", drained))
	if _, err := MakePlan(app(svc("web", 1)), all, PlanOptions{}); err == nil || !strings.Contains(err.Error(), "drained") {
		t.Fatalf("all drained: %v", err)
	}
}

func TestPlanRolesAndAccepts(t *testing.T) {
	db := svc("db", 2, func(s *Service) { s.Roles = []string{"db"} })
	web := svc("web", 3, func(s *Service) {})
	role := map[string]string{rpc.MachineLabelRolePrefix + "db": "true"}
	edge := map[string]string{rpc.MachineLabelAccepts: "ingress"} // takes no services
	snap := snapOf(machine("m1", role), machine("m2", nil), machine("m3", edge), machine("m4", role))
	p, err := MakePlan(app(db, web), snap, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// db only where the role is; nothing on m3, which accepts no services.
	want := lines("m1 db create", "m4 db create", "m1 web create", "m2 web create", "m4 web create")
	if got := summary(p); got != want {
		t.Fatalf("rows:\n%s\nwant:\n%s", got, want)
	}
	// A role no Machine has is named.
	cache := svc("cache", 1, func(s *Service) { s.Roles = []string{"cache"} })
	if _, err := MakePlan(app(cache), snap, PlanOptions{}); err == nil || !strings.Contains(err.Error(), `role "cache"`) {
		t.Fatalf("missing role: %v", err)
	}
	// The role is on m3 only, which accepts no services: still refused.
	snap3 := snapOf(machine("m2", nil), machine("m3", map[string]string{rpc.MachineLabelAccepts: "builds", rpc.MachineLabelRolePrefix + "cache": ""}))
	if _, err := MakePlan(app(cache), snap3, PlanOptions{}); err == nil || !strings.Contains(err.Error(), `role "cache"`) {
		t.Fatalf("role on a Machine taking no services: %v", err)
	}
	// No Machine accepts services at all.
	if _, err := MakePlan(app(web), snapOf(machine("m3", edge)), PlanOptions{}); err == nil || !strings.Contains(err.Error(), "accepts services") {
		t.Fatalf("no Machine accepts services: %v", err)
	}
}

func TestXPlacementRoles(t *testing.T) {
	var s Service
	var spec rpc.ContainerSpec
	if _, err := applyExtensions(&s, &spec, map[string]any{"x-placement": map[string]any{"roles": []any{"db", "db", "ssd"}}}, false); err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Roles, ",") != "db,ssd" || strings.Join(spec.Roles, ",") != "db,ssd" {
		t.Fatalf("roles %v, spec roles %v", s.Roles, spec.Roles)
	}
	_, err := applyExtensions(&s, &spec, map[string]any{"x-placement": map[string]any{"roles": []any{"DB!"}}}, false)
	if err == nil || !strings.Contains(err.Error(), "x-placement.roles[0]") {
		t.Fatalf("bad role: %v", err)
	}
}

// TestPlanProvisionedVolumeLocality: a Service bind-mounting a Provisioned
// Volume goes to the Machine whose copy is the Writer, whatever the load;
// it is held while the Writer may sit on an unobserved Machine, and
// refused with the reason when the Writer is excluded, missing or double.
func TestPlanProvisionedVolumeLocality(t *testing.T) {
	db := svc("db", 1, func(s *Service) { s.Provisioned = []string{"pg"} })
	writerOn := func(i int, ms ...MachineState) Snapshot {
		s := snapOf(ms...)
		s.Machines[i].Writers = []string{"pg"}
		return s
	}
	p, err := MakePlan(app(db), writerOn(1, machine("m1", nil), machine("m2", nil), machine("m3", nil)), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != "m2 db create" {
		t.Fatalf("rows:\n%s", got)
	}

	// Moved: the Container on the old Writer's Machine is replaced by one
	// on the new Writer's.
	moved := writerOn(0, machine("m1", nil), machine("m2", nil, ctr("db", hashOf(db), "exited")))
	if p, err = MakePlan(app(db), moved, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != lines("m1 db create", "m2 db remove") {
		t.Fatalf("after a move, rows:\n%s", got)
	}

	unseen := snapOf(machine("m1", nil), machine("m2", nil))
	unseen.Machines[1].Observed = false
	unseen.Missing = []Unobserved{{MachineID: "id-m2", Name: "m2", Reason: "down"}}
	if p, err = MakePlan(app(db), unseen, PlanOptions{}); err != nil || len(p.Rows) != 0 || len(p.Unplaced()) != 1 || !strings.Contains(p.Unplaced()[0], "held: volume pg") {
		t.Fatalf("Writer unobserved: err %v rows %+v unplaced %v", err, p.Rows, p.Unplaced())
	}

	zoned := svc("db", 1, func(s *Service) {
		s.Provisioned = []string{"pg"}
		s.Constraints = []rpc.Constraint{{Label: "zone", Op: "==", Value: "a"}}
	})
	two := writerOn(0, machine("m1", nil), machine("m2", nil))
	two.Machines[1].Writers = []string{"pg"}
	split := svc("db", 1, func(s *Service) { s.Provisioned = []string{"pg", "wal"} })
	splitSnap := writerOn(0, machine("m1", nil), machine("m2", nil))
	splitSnap.Machines[1].Writers = []string{"wal"}
	for _, c := range []struct {
		name string
		s    Service
		snap Snapshot
		want string
	}{
		{"excluded", zoned, writerOn(1, machine("m1", map[string]string{"zone": "a"}), machine("m2", map[string]string{"zone": "b"})),
			"Provisioned Volume pg has its Writer on m2, which the placement excludes (eligible: m1)"},
		{"no writer", db, snapOf(machine("m1", nil), machine("m2", nil)), "no Machine holds the Writer of Provisioned Volume pg"},
		{"two writers", db, two, "has a Writer on each of m1, m2"},
		{"split", split, splitSnap, "pg has its Writer on m1 and wal on m2"},
	} {
		if _, err := MakePlan(app(c.s), c.snap, PlanOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestPlanCreatesDeclaredProvisionedVolume(t *testing.T) {
	db := svc("db", 1, func(s *Service) { s.Provisioned = []string{"pg"} })
	a := app(db)
	a.Provisioned = []ProvisionedVolume{{Key: "pg", Name: "pg", SizeBytes: 64 << 20}}
	pool := map[string]string{"ployz.zfs.pool": "tank"}
	listed := func(ms ...MachineState) Snapshot {
		s := snapOf(ms...)
		s.VolumesListed = true
		return s
	}
	busy := machine("m2", pool, ctr("other", "h", "running"))
	p, err := MakePlan(a, listed(machine("m1", nil), busy, machine("m3", pool)), PlanOptions{NoPrune: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != lines("m3 db create-volume", "m3 db create") {
		t.Fatalf("rows:\n%s", got)
	}
	if r := p.Rows[0]; r.Op != OpCreateVolume || r.Volume != "pg" || r.SizeBytes != 64<<20 || !strings.Contains(r.Reason, "64MiB") {
		t.Fatalf("first row %+v", r)
	}

	// Once it exists, a deploy places by locality and creates nothing.
	made := listed(machine("m1", nil), busy, machine("m3", pool))
	made.Machines[2].Writers = []string{"pg"}
	if p, err = MakePlan(a, made, PlanOptions{NoPrune: true}); err != nil || summary(p) != "m3 db create" {
		t.Fatalf("existing: err %v rows:\n%s", err, summary(p))
	}

	// Without a size, a missing volume is refused as before.
	unsized := a
	unsized.Provisioned = []ProvisionedVolume{{Key: "pg", Name: "pg"}}
	if _, err := MakePlan(unsized, listed(machine("m1", pool)), PlanOptions{}); err == nil || !strings.Contains(err.Error(), "driver_opts.size") {
		t.Fatalf("unsized: %v", err)
	}

	mirror := listed(machine("m1", pool), machine("m2", pool))
	mirror.Machines[1].Held = []string{"pg"}
	unlisted := snapOf(machine("m1", pool), machine("m2", pool))
	unlisted.VolumesListed = true
	unlisted.VolumesUnlisted = []Unobserved{{MachineID: "id-m2", Name: "m2", Reason: "no answer"}}
	zoned := svc("db", 1, func(s *Service) {
		s.Provisioned = []string{"pg"}
		s.Constraints = []rpc.Constraint{{Label: "zone", Op: "==", Value: "a"}}
	})
	both := app(db, svc("backup", 1, func(s *Service) { s.Provisioned = []string{"pg"} }))
	both.Provisioned = a.Provisioned
	for _, c := range []struct {
		name string
		app  App
		snap Snapshot
		want string
	}{
		{"copy elsewhere", a, mirror, "has no Writer but m2 holds a copy"},
		{"not listed", a, unlisted, "m2 (no answer) did not list their volumes"},
		{"never listed", a, snapOf(machine("m1", pool)), "did not list their volumes"},
		{"no pool", a, listed(machine("m1", nil)), "no eligible Machine (m1) has a ZFS pool"},
		{"pool excluded", func() App { z := app(zoned); z.Provisioned = a.Provisioned; return z }(),
			listed(machine("m1", map[string]string{"zone": "a"}), machine("m2", map[string]string{"zone": "b", "ployz.zfs.pool": "tank"})), "no eligible Machine (m1) has a ZFS pool"},
		{"two services", both, listed(machine("m1", pool)), `services "db" and "backup" both mount it`},
	} {
		if _, err := MakePlan(c.app, c.snap, PlanOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// TestPlanAliasesNeedCapability: a Service with network aliases runs
// only on Machines that carry them into their rows; one without any is
// placed anywhere.
func TestPlanAliasesNeedCapability(t *testing.T) {
	with := func(m MachineState, caps ...string) MachineState { m.Capabilities = caps; return m }
	api := svc("api", 2, func(s *Service) { s.Spec.Aliases = map[string][]string{"external:payments": {"pay"}} })
	p, err := MakePlan(app(api), snapOf(with(machine("m1", nil), rpc.CapContainerAliases), machine("m2", nil)), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != "m1 api create\nm1 api create" {
		t.Errorf("rows:\n%s\nwant both on m1, the Machine that carries aliases", got)
	}
	if _, err := MakePlan(app(api), snapOf(machine("m2", nil)), PlanOptions{}); err == nil ||
		!strings.Contains(err.Error(), rpc.CapContainerAliases) || !strings.Contains(err.Error(), "m2") {
		t.Errorf("no Machine carries aliases: %v", err)
	}
	if _, err := MakePlan(app(svc("web", 1, func(*Service) {})), snapOf(machine("m2", nil)), PlanOptions{}); err != nil {
		t.Errorf("a Service without aliases on an older Machine: %v", err)
	}
}

// TestPlanJob: a scheduled job places no Container (one left from when
// it was a Service is stopped) and its run spec is stored: kind run, no
// ports or healthcheck, never restarted.
func TestPlanJob(t *testing.T) {
	sched := func(s *Service) {
		s.Schedule = &jobs.Schedule{Cron: "@daily", Concurrency: jobs.ConcurrencyForbid}
		s.Spec.Ports = []rpc.PortSpec{{ContainerPort: 80, HostPort: 8080}}
		s.Spec.Healthcheck = &rpc.Healthcheck{Test: []string{"CMD", "true"}}
	}
	report := svc("report", 2, sched)
	old := ctr("report", "old-hash", "running")
	p, err := MakePlan(app(report), snapOf(machine("m1", nil, old), machine("m2", nil)), PlanOptions{DeploymentID: "dep1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != lines("m1 report stop") {
		t.Fatalf("rows:\n%s", got)
	}
	if len(p.Jobs) != 1 || len(p.Services) != 1 || p.Services[0].Mode != ModeJob {
		t.Fatalf("jobs %+v services %+v", p.Jobs, p.Services)
	}
	j := p.Jobs[0]
	if j.Service != "report" || j.Schedule.Cron != "@daily" || j.Spec.Kind != rpc.KindRun || j.Spec.DeploymentID != "dep1" ||
		j.Spec.Restart != "no" || len(j.Spec.Ports) != 0 || j.Spec.Healthcheck != nil || j.Spec.Namespace != ns {
		t.Fatalf("job = %+v", j)
	}
	db := svc("report", 1, sched, func(s *Service) { s.Roles = []string{"db"} })
	p, err = MakePlan(app(db), snapOf(machine("m1", nil)), PlanOptions{})
	if err != nil || len(p.Jobs) != 1 || !slices.ContainsFunc(p.Warnings, func(w string) bool {
		return strings.Contains(w, `job "report": no observed Machine would run its ticks now`)
	}) {
		t.Fatalf("a job no Machine admits: %v, warnings %q", err, p.Warnings)
	}
}
