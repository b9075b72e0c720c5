package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// Serving steps: the Service's Serving Pointer moves on the entry, then
// the executor waits for every Machine's ack.
const (
	ActionMovePointer = "move_serving_pointer"
	ActionWaitAcks    = "wait_serving_acks"
	// clusterMachine is the Machine column of serving steps: they act
	// on the Cluster's store through the entry, not on one Machine.
	clusterMachine = "(cluster)"
)

// DefaultAckTimeout bounds the wait for acks of a moved Serving Pointer.
const DefaultAckTimeout = 60 * time.Second

type serviceGroup struct {
	service string
	rows    []int
}

// serviceGroups splits rows into Services in order of first appearance.
func serviceGroups(rows []Row) []serviceGroup {
	var gs []serviceGroup
	at := map[string]int{}
	for i, r := range rows {
		k, ok := at[r.Service]
		if !ok {
			k = len(gs)
			at[r.Service] = k
			gs = append(gs, serviceGroup{service: r.Service})
		}
		gs[k].rows = append(gs[k].rows, i)
	}
	return gs
}

// pointerState is the Service's Serving Pointer as the executor tracks it.
type pointerState struct {
	key     string // namespace/service
	enabled bool   // the entry serves Serving Pointers
	waitAck bool   // proxies may route the Service: wait for acks
	id      string
	set     []rpc.ServingContainer
}

func (ps pointerState) ids() []string {
	var out []string
	for _, c := range ps.set {
		out = append(out, c.ID)
	}
	slices.Sort(out)
	return out
}

// run runs one Service's rows: bring-up rows, the pointer move and ack
// wait, then the rows that stop or remove Containers.
func (sr *serviceRun) run(ctx context.Context) {
	if !sr.changed() {
		return
	}
	sr.pullPhase(ctx)
	ps := sr.e.readPointer(ctx, sr.p, sr.g)
	sr.leaveStopFirst(ctx, &ps)
	up := sr.bringUp(ctx)
	// A Service none of whose rows was attempted (a failed pull, a failed
	// dependency) is left exactly as it was: its pointer does not move.
	if ps.enabled && up.attempted(sr.g.rows) {
		sr.pointAtNew(ctx, &ps, up)
	}
	if sr.bringDown(ctx, up) && ps.enabled && ps.id != "" {
		// The Service is gone: its pointer goes with it.
		err := rpc.InvokeInto(context.WithoutCancel(ctx), sr.e.C, rpc.Target{}, rpc.MoveServingPointer, rpc.MoveServingPointerRequest{Service: ps.key, Delete: true}, nil)
		if err != nil {
			sr.add(sr.e.servingStep(sr.p, sr.g, ActionMovePointer, Step{Status: StepFailed, Error: "delete the pointer: " + err.Error()}))
		}
	}
}

// changed reports whether any of the Service's rows changes something.
func (sr *serviceRun) changed() bool {
	for _, i := range sr.g.rows {
		if sr.p.Rows[i].Op != OpUnchanged {
			return true
		}
	}
	return false
}

// leaveStopFirst moves the pointer off the old Containers stop-first
// replacements stop in the bring-up phase, before they stop.
func (sr *serviceRun) leaveStopFirst(ctx context.Context, ps *pointerState) {
	p, g := sr.p, sr.g
	var leaving []string
	for _, i := range g.rows {
		if r := p.Rows[i]; r.Op == OpReplace && r.Strategy == StopFirst && r.OldRunning {
			leaving = append(leaving, r.OldID)
		}
	}
	if len(leaving) == 0 || !ps.enabled || sr.rs.skipReason(ctx, p, p.Rows[g.rows[0]]) != "" {
		return
	}
	next := sr.e.pointerSet(p, g, *ps, func(i int) []rpc.ServingContainer {
		r := p.Rows[i]
		if slices.Contains(leaving, r.OldID) || r.Op == OpCreate || r.Op == OpHook || r.Op == OpRetire {
			return nil
		}
		return old(r)
	})
	sr.movePointer(ctx, ps, next)
}

// bringUpResult is what the bring-up phase did to each row.
type bringUpResult struct {
	mu      sync.Mutex
	newIDs  map[int]string
	upOK    map[int]bool
	skipped map[int]bool
}

func (u *bringUpResult) attempted(rows []int) bool {
	for _, i := range rows {
		if !u.skipped[i] {
			return true
		}
	}
	return false
}

// bringUp runs every row's bring-up actions (create, start, wait ready).
func (sr *serviceRun) bringUp(ctx context.Context) *bringUpResult {
	u := &bringUpResult{newIDs: map[int]string{}, upOK: map[int]bool{}, skipped: map[int]bool{}}
	sr.forRows(sr.g.rows, func(i int) []Step {
		r := sr.p.Rows[i]
		skip := sr.rs.skipReason(ctx, sr.p, r)
		steps, id, ok := sr.e.runActs(ctx, i, r, upActions(r), skip)
		u.mu.Lock()
		u.skipped[i], u.newIDs[i], u.upOK[i] = skip != "", id, ok
		u.mu.Unlock()
		if !ok && skip == "" {
			sr.rs.fail(r)
		}
		return steps
	})
	return u
}

// pointAtNew moves the pointer to what the bring-up left serving.
func (sr *serviceRun) pointAtNew(ctx context.Context, ps *pointerState, u *bringUpResult) {
	p := sr.p
	next := sr.e.pointerSet(p, sr.g, *ps, func(i int) []rpc.ServingContainer {
		r := p.Rows[i]
		switch {
		case r.Op == OpHook:
			return nil
		case r.Op == OpRetire:
			// Out of the pointer only when its replacements came up: a
			// failed Service keeps naming it, for when its Machine returns.
			if u.skipped[i] || sr.rs.skipReason(ctx, p, r) != "" {
				return old(r)
			}
			return nil
		case u.skipped[i]:
			return old(r) // never touched: still what it was
		case r.Op == OpStop || r.Op == OpRemove:
			return nil
		case (r.Op == OpCreate || r.Op == OpReplace) && u.upOK[i]:
			return []rpc.ServingContainer{{ID: u.newIDs[i], MachineID: r.MachineID, Deployment: p.DeploymentID}}
		case r.Op == OpCreate:
			return nil
		}
		return old(r) // unchanged, start, a failed replacement's old
	})
	sr.movePointer(ctx, ps, next)
}

// bringDown runs the rows' stop and remove actions, skipping rows whose
// bring-up failed or never ran; it reports whether every row removed its
// Container (the Service is gone).
func (sr *serviceRun) bringDown(ctx context.Context, u *bringUpResult) bool {
	var mu sync.Mutex
	removedAll := true
	sr.forRows(sr.g.rows, func(i int) []Step {
		r := sr.p.Rows[i]
		skip := ""
		if u.skipped[i] {
			skip = sr.rs.skipReason(ctx, sr.p, r)
			if skip == "" {
				skip = "an earlier step of this row was not attempted"
			}
		} else if !u.upOK[i] {
			skip = "an earlier step of this row failed"
		}
		steps, _, ok := sr.e.runActs(ctx, i, r, downActions(r), skip)
		if !ok && skip == "" && len(downActions(r)) > 0 {
			sr.rs.fail(r)
		}
		if r.Op != OpRemove || skip != "" {
			mu.Lock()
			removedAll = false
			mu.Unlock()
		}
		return steps
	})
	return removedAll
}

func old(r Row) []rpc.ServingContainer {
	if r.OldID == "" {
		return nil
	}
	return []rpc.ServingContainer{{ID: r.OldID, MachineID: r.MachineID}}
}

// pointerSet is the Service's next pointer: what keep says of each row,
// plus the current pointer's Containers on Machines the plan has no row
// of this Service on (not observed: nothing is known to have changed).
func (e *Executor) pointerSet(p Plan, g serviceGroup, ps pointerState, keep func(int) []rpc.ServingContainer) []rpc.ServingContainer {
	var out []rpc.ServingContainer
	onMachine := map[string]bool{}
	for _, i := range g.rows {
		onMachine[p.Rows[i].MachineID] = true
		out = append(out, keep(i)...)
	}
	for _, c := range ps.set {
		if !onMachine[c.MachineID] {
			out = append(out, c)
		}
	}
	return out
}

// readPointer asks the entry for the Service's current pointer. An entry
// without Serving Pointers (an older daemon) disables them for this run;
// any other failure is retried briefly, then the run goes on without the
// current pointer's Containers on unobserved Machines (a failed move is
// reported as a step).
func (e *Executor) readPointer(ctx context.Context, p Plan, g serviceGroup) pointerState {
	ps := pointerState{key: ingress.ServiceKey(p.Namespace, g.service), waitAck: true}
	if len(p.Services) > 0 {
		ps.waitAck = false
		for _, s := range p.Services {
			if s.Name == g.service && len(s.Ingress) > 0 {
				ps.waitAck = true
			}
		}
	}
	var st rpc.ServingStatus
	for try := 0; ; try++ {
		err := rpc.InvokeInto(ctx, e.C, rpc.Target{}, rpc.ReadServingStatus, rpc.ServingStatusRequest{Services: []string{ps.key}}, &st)
		var re *rpc.Error
		if errors.As(err, &re) && re.Code == rpc.CodeUnsupported {
			return ps
		}
		if err == nil || try == 2 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	ps.enabled = true
	for _, s := range st.Services {
		if s.Service == ps.key {
			ps.id, ps.set = s.Pointer, s.Containers
			if s.Pointer != "" {
				ps.waitAck = true // proxies follow it whether or not routes remain
			}
		}
	}
	return ps
}

// movePointer moves the pointer to next (unless it already names exactly
// that) and waits for the acks.
func (sr *serviceRun) movePointer(ctx context.Context, ps *pointerState, next []rpc.ServingContainer) {
	e, p, g := sr.e, sr.p, sr.g
	want := pointerState{set: next}
	if ps.id != "" && slices.Equal(ps.ids(), want.ids()) {
		return
	}
	if ps.id == "" && len(next) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx) // a moved pointer is always waited for
	s := e.servingStep(p, g, ActionMovePointer, Step{})
	e.emit(s, false)
	start := time.Now()
	var moved rpc.ServingPointerMoved
	err := rpc.InvokeInto(ctx, e.C, rpc.Target{}, rpc.MoveServingPointer, rpc.MoveServingPointerRequest{Service: ps.key, Deployment: p.DeploymentID, Containers: next}, &moved)
	s.began, s.took = start, time.Since(start)
	s.DurationMS, s.StartedAt = s.took.Milliseconds(), start.UTC().Format(time.RFC3339)
	if err != nil {
		s.Status, s.Error = StepFailed, err.Error()
		e.emit(s, true)
		sr.add(s)
		sr.rs.partial()
		return
	}
	s.Status, s.Container = StepCompleted, fmt.Sprintf("%s -> %d Container(s)", moved.ID, len(next))
	if len(moved.Unseen) > 0 {
		s.Error = "not yet seen by the entry (named by id only): " + strings.Join(moved.Unseen, ", ")
	}
	e.emit(s, true)
	sr.add(s)
	ps.id, ps.set = moved.ID, next
	if ps.waitAck {
		sr.waitAcks(ctx, ps.key, moved.ID)
	}
}

// waitAcks waits until every participating Machine that runs ingress and
// is not Down acks pointer id (the entry's serving_status says which);
// past AckTimeout it reports the Machines that did not.
func (sr *serviceRun) waitAcks(ctx context.Context, key, id string) {
	e, p, g := sr.e, sr.p, sr.g
	timeout := e.AckTimeout
	if timeout == 0 {
		timeout = DefaultAckTimeout
	}
	s := e.servingStep(p, g, ActionWaitAcks, Step{Container: id})
	e.emit(s, false)
	start := time.Now()
	var pending []string
	for {
		var st rpc.ServingStatus
		// The entry answers once the acks are in (or after a few
		// seconds); an older entry answers at once and this polls.
		req := rpc.ServingStatusRequest{Services: []string{key}, WaitPointer: id, WaitSeconds: int(min(max(time.Until(start.Add(timeout)), time.Second), 5*time.Second) / time.Second)}
		err := rpc.InvokeInto(ctx, e.C, rpc.Target{}, rpc.ReadServingStatus, req, &st)
		if err == nil && len(st.Services) == 1 {
			sv := st.Services[0]
			sv.Pointer = id
			if pending = sv.Pending(); len(pending) == 0 {
				break
			}
		} else if err != nil {
			pending = []string{"entry: " + err.Error()}
		}
		if time.Since(start) > timeout {
			s.Status, s.Error = StepFailed, fmt.Sprintf("not acked after %s by %s; continuing, so their proxies may still route to Containers that stop", timeout, strings.Join(pending, ", "))
			s.began, s.took = start, time.Since(start)
			s.DurationMS = s.took.Milliseconds()
			e.emit(s, true)
			sr.add(s)
			sr.rs.partial()
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	s.began, s.took = start, time.Since(start)
	s.Status, s.DurationMS = StepCompleted, s.took.Milliseconds()
	e.emit(s, true)
	sr.add(s)
}

func (e *Executor) servingStep(p Plan, g serviceGroup, action string, s Step) Step {
	s.Row, s.Machine, s.Service, s.Action = g.rows[0], clusterMachine, g.service, action
	return s
}

// pullPhase runs every pull of a Service's rows before anything of the
// Service changes, on each Machine even when another Machine's pull
// failed, so the outcome names every Machine whose pull failed; one
// failure then skips the Service's other rows.
func (sr *serviceRun) pullPhase(ctx context.Context) {
	var pulls []int
	for _, i := range sr.g.rows {
		if r := sr.p.Rows[i]; r.Pull && r.Spec != nil {
			pulls = append(pulls, i)
		}
	}
	var mu sync.Mutex
	var bad []Row
	sr.forRows(pulls, func(i int) []Step {
		r := sr.p.Rows[i]
		skip := sr.rs.skipReason(ctx, sr.p, r)
		steps, _, ok := sr.e.runActs(ctx, i, r, []action{{rpc.CmdPullImage, "image"}}, skip)
		if !ok && skip == "" {
			mu.Lock()
			bad = append(bad, r)
			mu.Unlock()
		}
		return steps
	})
	for _, r := range bad {
		sr.rs.fail(r)
	}
}
