package volumerun

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ployz/ployz/core/leasehold"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Volume Runs (the design): the operator drives them. A run is a fixed
// list of steps, each admitted by the Machine it touches against its own
// copy (set_volume_copy's expected copy and floor); the Cluster keeps one
// open run per Volume, numbered by its gen (book.go). Streams go Machine
// to Machine (send_volume_to into the target's volume transport, port
// 7574) where both serve it, else through this process (xfer.go).

// Runner drives Volume Runs and volume commands for one operator context.
type Runner struct {
	// Entry is the Entry Machine's client: every Machine is reached
	// through it.
	Entry *rpc.Client
	// Store numbers and records the runs when the entry keeps none (an
	// older release); nil: the Cluster's record only.
	Store *operator.Store
	// Context is the operator context runs are recorded under.
	Context string
	// OnEvent receives progress; nil drops it. Calls never overlap.
	OnEvent func(Event)
	// RegistryAuth answers the registry credentials for images a Move's
	// target pulls (nil: anonymous pulls).
	RegistryAuth func(images []string) (func(image string) string, error)
	// Operator, when named, is who the Cluster's history says ran each run.
	Operator operator.Operator
	// Lease takes a run's volume lease (lease.go); nil runs unleased.
	Lease LeaseFunc

	waits waits
}

// New is a Runner on entry, recording runs in the Cluster (else in st,
// when not nil) under contextName as op, each run under its volume's
// lease (core/leasehold; a held lease refuses the run). The operator
// library's Session sets Lease to its own Hold (its wait flags) and
// RegistryAuth; ployzd's scheduled Sync uses it as it is. onEvent may
// be nil.
func New(entry *rpc.Client, st *operator.Store, contextName string, op operator.Operator, onEvent func(Event)) *Runner {
	r := &Runner{Entry: entry, Store: st, Context: contextName, OnEvent: onEvent, Operator: op}
	// Each run holds its volume's lease; losing it is reported as a
	// warning and ends the run before its next step.
	r.Lease = func(ctx context.Context, scope, command string) (context.Context, func(), error) {
		return leasehold.Holder{Entry: entry, Who: r.operatorName()}.Hold(ctx, scope, command, leasehold.Wait{}, r.LeaseLost)
	}
	return r
}

// LeaseLost reports a lost lease as a warning (the run then ends
// before its next step).
func (rn *Runner) LeaseLost(err error) { rn.emit(Event{Kind: EventWarning, Text: err.Error()}) }

// waits are how long a run waits on Machines; zero fields take the
// defaults (tests shorten them).
type waits struct {
	// token is how long resumeAfter waits for a cut receive's token.
	token time.Duration
	// askEvery is the least time between two asks of a busy task (the
	// Machine itself waits a few seconds before answering busy).
	askEvery time.Duration
	// noAnswerFor is how long a Machine with a busy task may not answer
	// (a daemon restarting, the mesh hiccuping) before the step fails:
	// the task goes on there, and a run that stopped asking would undo
	// under it.
	noAnswerFor time.Duration
	// rollback bounds a snapshot restore's rollback_volume call: a zfs
	// rollback takes seconds, so a Machine silent for this long is stuck
	// (the run fails naming it, and starts the stopped Containers again).
	rollback time.Duration
	// showEvery is how often a call still waiting says so.
	showEvery time.Duration
}

func (w waits) orDefault() waits {
	if w.token == 0 {
		w.token = 20 * time.Second
	}
	if w.askEvery == 0 {
		w.askEvery = time.Second
	}
	if w.noAnswerFor == 0 {
		w.noAnswerFor = time.Minute
	}
	if w.rollback == 0 {
		w.rollback = 3 * time.Minute
	}
	if w.showEvery == 0 {
		w.showEvery = 10 * time.Second
	}
	return w
}

// EventKind says what an Event reports.
type EventKind string

const (
	// EventBegin: a run opened ("volume db: move run gen 3").
	EventBegin EventKind = "begin"
	// EventStep: a step ended; Text is its outcome, detail and error.
	EventStep EventKind = "step"
	// EventProgress: within a step, a stream's bytes or a Docker task's
	// state ("m1: docker stop web-ab12 (busy, 12s)").
	EventProgress EventKind = "progress"
	// EventNote: what a run did or left, in a sentence.
	EventNote EventKind = "note"
	// EventWarning: something went wrong beside the run (its record
	// was not saved).
	EventWarning EventKind = "warning"
)

// Event is one piece of a run's progress.
type Event struct {
	Kind EventKind `json:"kind"`
	// Step is the step it belongs to ("send", "stop"), if any.
	Step string `json:"step,omitempty"`
	// Machine is the Machine it is about, if one.
	Machine string `json:"machine,omitempty"`
	Text    string `json:"text"`
}

func (rn *Runner) emit(e Event) {
	if rn.OnEvent != nil {
		rn.OnEvent(e)
	}
}

// Result is how a run command ended: the run it opened, or why none was
// needed. Both are nil when it was refused before a run opened.
type Result struct {
	Run     *operator.VolumeRun `json:"run"`
	Nothing *Nothing            `json:"nothing,omitempty"`
}

// Nothing says the copies already are as asked: no run opened.
type Nothing struct {
	// Writer is the Machine the message is about (the Writer, or the
	// Machine a Release demoted).
	Writer  string `json:"writer"`
	Message string `json:"message"`
}

func nothing(machine, msg string) (Result, error) {
	return Result{Nothing: &Nothing{Writer: machine, Message: msg}}, nil
}

// volumeRun drives one run and records each step's outcome.
type volumeRun struct {
	*Runner
	ctx context.Context
	run operator.VolumeRun
	// local says the run is recorded in the operator store (an entry
	// that keeps no Volume Runs), not the Cluster.
	local bool
	waits waits
	// step is the step running now, for its progress events.
	cur string
	// tasks holds the Machines known to serve volume_task, asked once a
	// run rather than before every Container step.
	tasks map[string]bool
}

// runVolume opens a run of kind on cp's volume, drives it with fn and
// ends it.
func (rn *Runner) runVolume(ctx context.Context, cp Copies, kind, target string, fn func(r *volumeRun) error) (Result, error) {
	ctx, release, err := rn.lease(ctx, cp.Name, kind)
	if err != nil {
		return Result{}, err
	}
	defer release()
	r, err := rn.beginRun(ctx, cp, kind, target)
	if err != nil {
		return Result{}, err
	}
	err = r.finish(fn(r))
	r.recordHistory(err)
	return Result{Run: &r.run}, err
}

// beginRun opens the run with a gen above every gen of the volume the
// Cluster holds and every floor the copies showed (runs an older
// release recorded only on another computer may have raised them).
func (rn *Runner) beginRun(ctx context.Context, cp Copies, kind, target string) (*volumeRun, error) {
	r, local, err := rn.beginRecord(ctx, cp, kind, target)
	var open *operator.RunOpenError
	if errors.As(err, &open) {
		return nil, rpc.Errorf(rpc.CodeConflict, "%v: wait for it, or end its process", err).With("gen", open.Run.Gen)
	}
	if err != nil {
		return nil, err
	}
	rn.emit(Event{Kind: EventBegin, Text: fmt.Sprintf("volume %s: %s run gen %d", cp.Name, kind, r.Gen)})
	return &volumeRun{Runner: rn, ctx: ctx, run: r, local: local, waits: rn.waits.orDefault()}, nil
}

// progress reports a line within the step running now.
func (r *volumeRun) progress(machine, text string) {
	r.emit(Event{Kind: EventProgress, Step: r.cur, Machine: machine, Text: text})
}

// note reports what the run did or left.
func (r *volumeRun) note(machine, text string) {
	r.emit(Event{Kind: EventNote, Machine: machine, Text: text})
}

// step runs fn as one named step on machine and records its outcome:
// done (or what fn set), failed, or cancelled when the run was.
func (r *volumeRun) step(name, machine string, fn func(st *operator.RunStep) error) error {
	st := operator.RunStep{Name: name, Machine: machine}
	start := time.Now()
	r.cur = name
	err := fn(&st)
	r.cur = ""
	st.Seconds = time.Since(start).Round(time.Millisecond).Seconds()
	switch {
	case err == nil && st.Outcome == "":
		st.Outcome = operator.RunDone
	case err != nil && r.ctx.Err() != nil:
		st.Outcome, st.Error = operator.RunCancelled, err.Error()
	case err != nil:
		st.Outcome, st.Error = operator.RunFailed, err.Error()
	}
	r.run.Steps = append(r.run.Steps, st)
	r.save()
	text := st.Outcome
	if st.Detail != "" {
		text += ": " + st.Detail
	}
	if st.Error != "" {
		text += ": " + st.Error
	}
	r.emit(Event{Kind: EventStep, Step: name, Machine: machine, Text: text})
	return err
}

func (r *volumeRun) save() {
	r.run.Updated = time.Now()
	if err := r.saveRecord(); err != nil {
		r.emit(Event{Kind: EventWarning, Text: fmt.Sprintf("volume run record not saved: %v", err)})
	}
}

// finish ends the run by err: done, failed or cancelled (undone stays).
func (r *volumeRun) finish(err error) error {
	switch {
	case err == nil:
		r.run.State = operator.RunDone
	case r.run.State == operator.RunUndone:
		r.run.Error = err.Error()
	case r.ctx.Err() != nil:
		r.run.State, r.run.Error = operator.RunCancelled, err.Error()
	default:
		r.run.State, r.run.Error = operator.RunFailed, err.Error()
	}
	r.save()
	return err
}

// setCopy is one set_volume_copy with this run's gen.
func (r *volumeRun) setCopy(machine, expect, want string) (rpc.VolumeCopySet, error) {
	var out rpc.VolumeCopySet
	err := rpc.InvokeInto(r.ctx, r.Entry, rpc.Target{One: machine}, rpc.SetVolumeCopy, rpc.SetVolumeCopyRequest{Volume: r.run.Volume, Gen: r.run.Gen, Expect: expect, Want: want}, &out)
	return out, err
}

// fence is a step reading machine's copy live and raising its floor to
// this run's gen: the copy must already be role (expect = want = role).
func (r *volumeRun) fence(machine, role string) error {
	return r.step("check-"+role, machine, func(st *operator.RunStep) error {
		out, err := r.setCopy(machine, role, role)
		if err == nil {
			st.Detail = fmt.Sprintf("%s, floor gen %d", out.Copy.Role, out.Copy.Floor)
		}
		return err
	})
}

// transition is a step moving machine's copy from expect to want; its
// detail is the copy's role after, or what detail makes of the answer.
func (r *volumeRun) transition(name, machine, expect, want string, detail func(rpc.VolumeCopySet) string) error {
	return r.step(name, machine, func(st *operator.RunStep) error {
		out, err := r.setCopy(machine, expect, want)
		if err == nil {
			st.Detail = out.Copy.Role
			if detail != nil {
				st.Detail = detail(out)
			}
		}
		return err
	})
}

// snapshot takes this run's snapshot (run-<gen>, suffix appended) on
// writer, kept when a retry finds it there, and answers writer's volume
// after it.
func (r *volumeRun) snapshot(name, writer string, wv rpc.Volume, suffix string) (string, rpc.Volume, error) {
	snap := "run-" + strconv.FormatUint(r.run.Gen, 10) + suffix
	err := r.step(name, writer, func(st *operator.RunStep) error {
		if hasSnapshot(wv, snap) != "" {
			st.Outcome, st.Detail = operator.StepSkipped, snap+" is there"
			return nil
		}
		st.Detail = snap
		return rpc.InvokeInto(r.ctx, r.Entry, rpc.Target{One: writer}, rpc.SnapshotVolume, rpc.SnapshotVolumeRequest{Volume: r.run.Volume, Snapshot: snap}, &wv)
	})
	return snap, wv, err
}

// inspect reads machine's copy of the run's volume.
func (r *volumeRun) inspect(machine string) (rpc.Volume, error) {
	var v rpc.Volume
	err := rpc.InvokeInto(r.ctx, r.Entry, rpc.Target{One: machine}, rpc.InspectVolume, rpc.VolumeRequest{Name: r.run.Volume}, &v)
	return v, err
}

// stoppedContainer is a Container a run stopped at its cut.
type stoppedContainer struct{ id, name string }

// undoStart ends an undo: after its earlier step's error (if any), it
// starts again each Container the run stopped on writer, and marks the
// run undone only when all went well; said is what writer is now.
func (r *volumeRun) undoStart(writer string, stopped []stoppedContainer, err error, said string) error {
	errs := []error{err}
	for _, u := range stopped {
		errs = append(errs, r.step("undo-start", writer, func(st *operator.RunStep) error {
			st.Detail = u.name
			return r.start(writer, u.name, u.id)
		}))
	}
	if e := errors.Join(errs...); e != nil {
		return fmt.Errorf("undo: %w", e)
	}
	r.run.State = operator.RunUndone
	r.note(writer, fmt.Sprintf("undone: %s %s and its Containers run", writer, said))
	return nil
}
