package deploy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// The executor fan-out harness (issue 49): the real Executor, through the
// real Machine RPC client, calls an entry that forwards each step to its
// Machine over mutual TLS, as `ployz deploy` does. Only the Machines are
// fakes: 100 real Machines (100 ployzd with Docker) cannot exist on this
// 2-core host, so each is an rpc.Server on loopback serving the mesh
// listener (MeshServer: TLS, admission of the entry's key) whose container
// commands wait a simulated mesh round trip plus a simulated Docker time
// instead of calling Docker. The entry's Serving Pointer commands are
// faked the same way: a move is acked by every Machine after ackDelay.

// fanoutLatency is what a fake Machine waits per command. Each wait is
// uniform in [d/2, 3d/2]; rtt is uniform in [rtt/2, 3rtt/2] (10 ms ± 5 ms,
// the store harness's figure).
type fanoutLatency struct {
	rtt      time.Duration
	docker   map[string]time.Duration // by command
	ackDelay time.Duration
}

// realisticLatency: Docker times of a small image already present on a
// loaded Machine, and a readiness wait of a Service that is ready about a
// third of a second after it starts.
func realisticLatency() fanoutLatency {
	return fanoutLatency{
		rtt: 10 * time.Millisecond,
		docker: map[string]time.Duration{
			rpc.CmdCreateContainer: 60 * time.Millisecond,
			rpc.CmdStartContainer:  150 * time.Millisecond,
			rpc.CmdWaitReady:       300 * time.Millisecond,
			rpc.CmdStopContainer:   100 * time.Millisecond,
			rpc.CmdRemoveContainer: 30 * time.Millisecond,
		},
		ackDelay: 200 * time.Millisecond,
	}
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(mrand.Int64N(int64(d)+1))
}

// gauge counts calls in flight and remembers the most at once.
type gauge struct{ now, peak atomic.Int64 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// fakeMachine is one simulated Machine's container commands.
type fakeMachine struct {
	id, name string
	fl       *fanoutFleet
	inflight gauge
	// failCreate, when set, is the error every create_container returns.
	failCreate string

	mu      sync.Mutex
	created []string // names, in order
}

func (m *fakeMachine) serve(cmd string) {
	m.fl.all.enter()
	m.inflight.enter()
	m.fl.calls.Add(1)
	time.Sleep(jitter(m.fl.lat.rtt) + jitter(m.fl.lat.docker[cmd]))
	m.inflight.leave()
	m.fl.all.leave()
}

func (m *fakeMachine) routes(s *rpc.Server) {
	s.Handle(rpc.Bind(rpc.CreateContainer, func(_ context.Context, req rpc.CreateContainerRequest) (rpc.ContainerObservation, error) {
		m.serve(rpc.CmdCreateContainer)
		if m.failCreate != "" {
			return rpc.ContainerObservation{}, rpc.Errorf(rpc.CodeInternal, "%s", m.failCreate)
		}
		m.mu.Lock()
		m.created = append(m.created, req.Name)
		// Unique like Docker's ids: two replicas of a Service on two
		// Machines may share a name (a 4-hex-digit suffix each).
		id := fmt.Sprintf("%s-c%d", m.id, len(m.created))
		m.mu.Unlock()
		return rpc.ContainerObservation{ID: id, Name: req.Name, MachineID: m.id, State: "created"}, nil
	}))
	s.Handle(rpc.Bind(rpc.StartContainer, func(_ context.Context, req rpc.ContainerRef) (rpc.ContainerObservation, error) {
		m.serve(rpc.CmdStartContainer)
		return rpc.ContainerObservation{ID: req.ID, MachineID: m.id, State: "running"}, nil
	}))
	s.Handle(rpc.Bind(rpc.WaitReady, func(_ context.Context, _ rpc.WaitReadyRequest) (rpc.WaitReadyResult, error) {
		m.serve(rpc.CmdWaitReady)
		return rpc.WaitReadyResult{Outcome: "ready"}, nil
	}))
	s.Handle(rpc.Bind(rpc.StopContainer, func(_ context.Context, req rpc.StopContainerRequest) (rpc.ContainerObservation, error) {
		m.serve(rpc.CmdStopContainer)
		return rpc.ContainerObservation{ID: req.ID, MachineID: m.id, State: "exited"}, nil
	}))
	s.Handle(rpc.Bind(rpc.RemoveContainer, func(_ context.Context, req rpc.RemoveContainerRequest) (rpc.ContainerRemoved, error) {
		m.serve(rpc.CmdRemoveContainer)
		return rpc.ContainerRemoved{Removed: req.ID}, nil
	}))
}

// fanoutFleet is the entry and its simulated Machines.
type fanoutFleet struct {
	lat      fanoutLatency
	machines []*fakeMachine
	all      gauge // calls in flight on all Machines
	calls    atomic.Int64
	entry    *rpc.Client // the operator's connection, as client/ holds it

	mu       sync.Mutex
	pointers map[string]fakePointer // by Service key
	moves    int
}

type fakePointer struct {
	id    string
	set   []rpc.ServingContainer
	moved time.Time
}

// newFanoutFleet starts n fake Machines named m000… with IDs id-m000…
// (the names scaleSnapshot gives) and an entry forwarding to them over
// mutual TLS, as a Machine does.
func newFanoutFleet(tb testing.TB, n int, lat fanoutLatency) *fanoutFleet {
	return startFanoutFleet(tb, n, lat, true)
}

// startFanoutFleet is newFanoutFleet; without mtls the entry forwards over
// plain TCP (rpc.Options' test default) to Machines without the mesh
// listener, to tell the TLS handshakes' share of the cost from the rest.
func startFanoutFleet(tb testing.TB, n int, lat fanoutLatency, mtls bool) *fanoutFleet {
	tb.Helper()
	fl := &fanoutFleet{lat: lat, pointers: map[string]fakePointer{}}
	entryID := newIdentity(tb)
	// The entry's own address as the Machines' machines tables hold it:
	// the mesh listener admits the entry's key from this host only.
	entryPeer := rpc.Peer{ID: "id-entry", Name: "entry", Address: "127.0.0.1:1", RPCKey: entryID.PublicKey(), Phase: rpc.PhaseParticipating}
	var peers []rpc.Peer
	for i := 0; i < n; i++ {
		m := &fakeMachine{id: fmt.Sprintf("id-m%03d", i), name: fmt.Sprintf("m%03d", i), fl: fl}
		id := newIdentity(tb)
		srv := rpc.NewServer(rpc.Options{
			Local: func() (string, string) { return m.id, m.name },
			Peers: func(context.Context) ([]rpc.Peer, error) { return []rpc.Peer{entryPeer}, nil },
		})
		m.routes(srv)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		g := srv.GRPCServer()
		if mtls {
			g = srv.MeshServer(id)
		}
		go g.Serve(l)
		tb.Cleanup(g.Stop)
		fl.machines = append(fl.machines, m)
		peers = append(peers, rpc.Peer{ID: m.id, Name: m.name, Address: l.Addr().String(), RPCKey: id.PublicKey(), Phase: rpc.PhaseParticipating})
	}
	o := rpc.Options{
		Local: func() (string, string) { return entryPeer.ID, entryPeer.Name },
		Peers: func(context.Context) ([]rpc.Peer, error) { return peers, nil },
	}
	if mtls {
		o.Dial = rpc.MeshDialer{Identity: entryID}.Dial // the daemon's dial, without the mesh source address
	}
	entry := rpc.NewServer(o)
	fl.servingRoutes(entry)
	sock := filepath.Join(tb.TempDir(), "ployzd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	g := entry.GRPCServer()
	go g.Serve(l)
	tb.Cleanup(g.Stop)
	c, err := rpc.DialUnix(sock)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	fl.entry = c
	return fl
}

func newIdentity(tb testing.TB) *rpc.Identity {
	tb.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := rpc.NewIdentity(k)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// servingRoutes serves the entry's Serving Pointer commands: a move is
// recorded, and a status waiting for it answers once ackDelay has passed
// since the move, every Machine acking it.
func (fl *fanoutFleet) servingRoutes(s *rpc.Server) {
	s.Handle(rpc.Bind(rpc.MoveServingPointer, func(_ context.Context, req rpc.MoveServingPointerRequest) (rpc.ServingPointerMoved, error) {
		if err := req.Validate(); err != nil {
			return rpc.ServingPointerMoved{}, err
		}
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if req.Delete {
			delete(fl.pointers, req.Service)
			return rpc.ServingPointerMoved{}, nil
		}
		fl.moves++
		p := fakePointer{id: fmt.Sprintf("p%d", fl.moves), set: req.Containers, moved: time.Now()}
		fl.pointers[req.Service] = p
		return rpc.ServingPointerMoved{ID: p.id, Containers: p.set}, nil
	}))
	s.Handle(rpc.Bind(rpc.ReadServingStatus, func(ctx context.Context, req rpc.ServingStatusRequest) (rpc.ServingStatus, error) {
		st := rpc.ServingStatus{ObserverID: "id-entry"}
		for _, key := range req.Services {
			fl.mu.Lock()
			p := fl.pointers[key]
			fl.mu.Unlock()
			acked := ""
			if p.id != "" {
				if wait := time.Until(p.moved.Add(fl.lat.ackDelay)); wait > 0 && req.WaitPointer == p.id {
					select {
					case <-ctx.Done():
						return st, ctx.Err()
					case <-time.After(wait):
					}
				}
				if time.Since(p.moved) >= fl.lat.ackDelay {
					acked = p.id
				}
			}
			sv := rpc.ServiceServing{Service: key, Pointer: p.id, Containers: p.set}
			for _, m := range fl.machines {
				sv.Acks = append(sv.Acks, rpc.ServingAck{MachineID: m.id, Machine: m.name, Membership: "up", Acked: acked})
			}
			st.Services = append(st.Services, sv)
		}
		return st, nil
	}))
}

// machinePeak is the most calls any one Machine had in flight at once.
func (fl *fanoutFleet) machinePeak() int64 {
	var most int64
	for _, m := range fl.machines {
		most = max(most, m.inflight.peak.Load())
	}
	return most
}

// stepPercentiles returns the p50 and p99 duration of the outcome's
// completed steps of action.
func stepPercentiles(o Outcome, action string) (p50, p99 time.Duration) {
	var ds []time.Duration
	for _, s := range o.Steps {
		if s.Action == action && s.Status == StepCompleted {
			ds = append(ds, s.took)
		}
	}
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[(len(ds)*99+99)/100-1]
}

// stepsByRow groups an outcome's non-compensation steps by plan row.
func stepsByRow(o Outcome) map[int][]Step {
	out := map[int][]Step{}
	for _, s := range o.Steps {
		if !s.Compensation && s.Machine != clusterMachine {
			out[s.Row] = append(out[s.Row], s)
		}
	}
	return out
}

// statuses is "completed=N failed=N never_attempted=N" of o's steps.
func statuses(o Outcome) string {
	var b strings.Builder
	for _, s := range []string{StepCompleted, StepFailed, StepNeverAttempted} {
		fmt.Fprintf(&b, "%s=%d ", s, o.Count(s))
	}
	return strings.TrimSpace(b.String())
}
