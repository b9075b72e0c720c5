package daemon

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/daemon/feature/containers"
	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	servingfeature "github.com/ployz/ployz/core/daemon/feature/serving"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// servedDaemon is one participating Machine as a deploy reaches it: the
// daemon's own Serving Pointer and Service Container routes behind a real
// Machine RPC socket, a real store node, real Docker, and its observe loop
// publishing Container rows. The executor under test is the CLI's.
func servedDaemon(t *testing.T) (*rpc.Client, *Daemon, *store.Client, *testOps) {
	t.Helper()
	d, st, to := observedDaemon(t)
	d.rpc = rpc.NewServer(rpc.Options{Local: d.local})
	for _, r := range d.serving().Routes() {
		d.rpc.Handle(r)
	}
	for _, r := range d.ctrs.Routes() {
		d.rpc.Handle(r)
	}
	c := featuretest.ServeServer(t, d.rpc)
	featuretest.PutMachine(t, st, d.record().ID, "test", machine.Participating)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.ctrs.ObserveLoop(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return c, d, st, to
}

// observedDaemon is a participating Daemon on a real store node whose
// Service Container commands run on real Docker (testOps).
func observedDaemon(t *testing.T) (*Daemon, *store.Client, *testOps) {
	t.Helper()
	to := newTestOps(t)
	d, st := storeDaemon(t, to.facts.MachineID)
	to.cfg.Rows = featureHost{d} // the observe loop publishes to d's store
	to.containerOps = containers.New(to.cfg)
	d.ctrs = to.containerOps
	return d, st, to
}

// proxy acks Serving Pointers for one Machine the way the ingress plugin
// does (a serving_acks row naming every pointer it loaded), and records
// whether each Container a pointer left out was still running when that
// pointer was acked.
type proxy struct {
	st      *store.Client
	machine string
	to      *testOps
	paused  atomic.Bool

	mu             sync.Mutex
	watch          []string        // Containers whose stop is checked
	acked          map[string]bool // pointer IDs
	stoppedTooSoon []string        // Containers stopped before the pointer leaving them out was acked
}

func (p *proxy) run(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		if p.paused.Load() {
			continue
		}
		ps, err := servingfeature.ReadPointers(ctx, p.st)
		if err != nil {
			continue
		}
		acks := map[string]string{}
		for svc, b := range ps {
			acks[svc] = b.ID
			p.mu.Lock()
			seen, watch := p.acked[b.ID], slices.Clone(p.watch)
			p.acked[b.ID] = true
			p.mu.Unlock()
			if seen {
				continue
			}
			// Every watched Container this pointer leaves out must still
			// be running: nothing may stop it before this ack.
			for _, id := range watch {
				if slices.ContainsFunc(b.Containers, func(c store.ServingContainer) bool { return c.ID == id }) {
					continue
				}
				in, err := p.to.Cli.ContainerInspect(ctx, id)
				if err == nil && in.State != nil && !in.State.Running && !strings.Contains(in.State.Status, "created") {
					p.mu.Lock()
					p.stoppedTooSoon = append(p.stoppedTooSoon, feature.Short(id))
					p.mu.Unlock()
				}
			}
		}
		p.st.ServingAcks().Put(ctx, store.Row[store.ServingAckBody]{Key: p.machine, Owner: p.machine, // retried next round
			Body: store.ServingAckBody{Pointers: acks, Loaded: time.Now().UnixMilli()}})
	}
}

func stepsOf(o deploy.Outcome) string {
	var s []string
	for _, st := range o.Steps {
		s = append(s, st.Machine+" "+st.Action+" "+st.Status+" "+st.Error)
	}
	return strings.Join(s, "\n")
}

// TestExecutorAgainstTheDaemon runs the deploy executor against the real
// daemon: Containers are created on Docker, the Serving Pointer moves in
// the store naming them with the identity their owner's rows report, the
// executor waits for the proxy's ack before it stops what the pointer left
// out, and a Machine that never acks is named in a failed wait step.
func TestExecutorAgainstTheDaemon(t *testing.T) {
	c, d, st, to := servedDaemon(t)
	self := d.record().ID
	ctx := context.Background()
	svc := ingress.ServiceKey(to.Namespace, "web")
	summary := []deploy.ServiceSummary{{Name: "web", ServiceID: "sid-web", Mode: "replicated", Desired: 1,
		Ingress: []deploy.IngressRoute{{Hostname: "web.example", ContainerPort: 8080}}}}
	ex := &deploy.Executor{C: c, AckTimeout: 15 * time.Second, ReadyTimeout: 30 * time.Second}

	// 1. Create: the pointer names the new Container.
	p1 := deploy.Plan{Namespace: to.Namespace, DeploymentID: "dep1", Services: summary,
		Rows: []deploy.Row{{MachineID: self, Machine: "test", Service: "web", Op: deploy.OpCreate, NewName: to.Name("web-1"), Spec: ptr(to.Spec("web", nil))}}}
	px := &proxy{st: st, machine: self, to: to, acked: map[string]bool{}}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go px.run(pctx)
	o := ex.Run(ctx, p1)
	if o.Partial() {
		t.Fatalf("create failed:\n%s", stepsOf(o))
	}
	first := pointerIDs(t, st, svc)
	if len(first) != 1 {
		t.Fatalf("pointer after create names %v", first)
	}
	id1 := first[0]
	if in, err := to.Cli.ContainerInspect(ctx, id1); err != nil || !in.State.Running {
		t.Fatalf("created Container %s: %v", feature.Short(id1), err)
	}
	pb, _, _ := st.Serving().Get(ctx, svc)
	if pb.Body.Deployment != "dep1" || pb.Body.Containers[0].Machine != self || pb.Body.Containers[0].ImageID == "" {
		t.Fatalf("pointer %+v: want the owner's identity of the Container", pb.Body)
	}

	// 2. Start-first replace with a proxy acking: the old Container runs
	// until the pointer that leaves it out is acked, then goes.
	px.mu.Lock()
	px.watch = []string{id1}
	px.mu.Unlock()
	s2 := to.Spec("web", nil)
	s2.SpecHash, s2.DeploymentID = "hash2", "dep2"
	p2 := deploy.Plan{Namespace: to.Namespace, DeploymentID: "dep2", Services: summary,
		Rows: []deploy.Row{{MachineID: self, Machine: "test", Service: "web", Op: deploy.OpReplace, Strategy: deploy.StartFirst,
			OldID: id1, OldName: to.Name("web-1"), OldRunning: true, NewName: to.Name("web-2"), Spec: &s2}}}
	o = ex.Run(ctx, p2)
	if o.Partial() {
		t.Fatalf("replace failed:\n%s", stepsOf(o))
	}
	if !strings.Contains(stepsOf(o), deploy.ActionWaitAcks+" completed") {
		t.Fatalf("the replace never waited for acks:\n%s", stepsOf(o))
	}
	second := pointerIDs(t, st, svc)
	if len(second) != 1 || second[0] == id1 {
		t.Fatalf("pointer after replace names %v", second)
	}
	if _, err := to.Cli.ContainerInspect(ctx, id1); err == nil {
		t.Fatalf("the replaced Container %s is still there", feature.Short(id1))
	}
	px.mu.Lock()
	if len(px.stoppedTooSoon) > 0 {
		t.Fatalf("stopped before the pointer leaving them out was acked: %v", px.stoppedTooSoon)
	}
	px.mu.Unlock()

	// 3. No ack: the wait fails naming the Machine, and the run says so.
	px.paused.Store(true)
	ex.AckTimeout = 1500 * time.Millisecond
	s3 := to.Spec("web", nil)
	s3.SpecHash, s3.DeploymentID = "hash3", "dep3"
	p3 := deploy.Plan{Namespace: to.Namespace, DeploymentID: "dep3", Services: summary,
		Rows: []deploy.Row{{MachineID: self, Machine: "test", Service: "web", Op: deploy.OpReplace, Strategy: deploy.StartFirst,
			OldID: second[0], OldName: to.Name("web-2"), OldRunning: true, NewName: to.Name("web-3"), Spec: &s3}}}
	o = ex.Run(ctx, p3)
	var wait *deploy.Step
	for i := range o.Steps {
		if o.Steps[i].Action == deploy.ActionWaitAcks {
			wait = &o.Steps[i]
		}
	}
	if wait == nil || wait.Status != deploy.StepFailed || !strings.Contains(wait.Error, "by test (up)") {
		t.Fatalf("an unacked pointer: want a failed wait naming Machine test\n%s", stepsOf(o))
	}
}

func ptr[T any](v T) *T { return &v }

// pointerIDs is the Container IDs the Service's Serving Pointer names.
func pointerIDs(t *testing.T, st *store.Client, svc string) []string {
	t.Helper()
	r, ok, err := st.Serving().Get(context.Background(), svc)
	if err != nil || !ok {
		t.Fatalf("pointer %s: ok=%v err=%v", svc, ok, err)
	}
	var ids []string
	for _, c := range r.Body.Containers {
		ids = append(ids, c.ID)
	}
	return ids
}
