package deploy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Step statuses.
const (
	StepCompleted      = "completed"
	StepFailed         = "failed"
	StepNeverAttempted = "never_attempted"
)

// Step is one daemon call of an executed plan.
type Step struct {
	Row       int    `json:"row"` // index into Plan.Rows
	MachineID string `json:"machine_id"`
	Machine   string `json:"machine"`
	Service   string `json:"service"`
	// Action is the daemon command, e.g. create_container.
	Action string `json:"action"`
	// Container is the Container's name (or id when the name is unknown).
	Container string `json:"container"`
	// Compensation marks a step run because another step failed.
	Compensation bool     `json:"compensation,omitempty"`
	Status       string   `json:"status"`
	Error        string   `json:"error,omitempty"`
	LogTail      []string `json:"log_tail,omitempty"`
	StartedAt    string   `json:"started_at,omitempty"`
	DurationMS   int64    `json:"duration_ms,omitempty"`

	// began and took time the step precisely for the deploy's trace.
	began time.Time
	took  time.Duration
}

// Outcome is what an execution did: every step completed, failed or never
// attempted, in plan order (bet 8). Nothing is rolled back beyond the
// narrow compensation of a failed replacement.
type Outcome struct {
	DeploymentID string `json:"deployment_id"`
	// Status is completed, partial or cancelled.
	Status string `json:"status"`
	Steps  []Step `json:"steps"`
}

// Partial reports whether any step failed or never ran.
func (o Outcome) Partial() bool { return o.Status != "completed" }

// Count returns how many steps have status s.
func (o Outcome) Count(s string) int {
	n := 0
	for _, st := range o.Steps {
		if st.Status == s {
			n++
		}
	}
	return n
}

// Event reports a step starting (Done false) or ending (Done true), or,
// with Pull set, how far a running pull_image step is.
type Event struct {
	Step Step
	Done bool
	Pull *rpc.PullProgress
}

// Executor runs a confirmed plan's rows in order, one daemon call per
// step, against the Caller (the entry routes each call to its Machine).
type Executor struct {
	C Caller
	// Progress, when set, hears every step start and end.
	Progress func(Event)
	// ReadyTimeout bounds each wait_ready (default 120s).
	ReadyTimeout time.Duration
	// AckTimeout bounds each wait for Serving Pointer acks
	// (default DefaultAckTimeout).
	AckTimeout time.Duration
	// Files holds shipped file content by digest (App.Files); a create
	// sends the content its spec names. Like RegistryAuth it never
	// enters the plan or the outcome.
	Files map[string][]byte
	// RegistryAuth, when set, returns the encoded registry credential a
	// pull of image sends ("" for none). It stays on this side: the plan
	// and the outcome never hold it.
	RegistryAuth func(image string) string
	// Parallelism bounds how many Machines a phase of one Service acts on
	// at once (default DefaultParallelism).
	Parallelism int

	emitMu sync.Mutex // Progress hears one event at a time
}

// upActions are the calls a row makes before its Service's Serving
// Pointer moves (bringing Containers up), downActions those after it
// (stopping and removing what the pointer no longer names).
// A row's image pull runs earlier, in its Service's pull phase.
func upActions(r Row) []action {
	switch r.Op {
	case OpStop, OpRemove:
		return nil
	case OpReplace:
		if r.Strategy == StopFirst {
			return []action{{rpc.CmdStopContainer, "old"}, {rpc.CmdCreateContainer, "new"}, {rpc.CmdStartContainer, "new"}, {rpc.CmdWaitReady, "new"}}
		}
		return []action{{rpc.CmdCreateContainer, "new"}, {rpc.CmdStartContainer, "new"}, {rpc.CmdWaitReady, "new"}}
	}
	return actions(r)
}

func downActions(r Row) []action {
	switch r.Op {
	case OpStop, OpRemove:
		return actions(r)
	case OpReplace:
		if r.Strategy == StopFirst {
			return []action{{rpc.CmdRemoveContainer, "old"}}
		}
		return []action{{rpc.CmdStopContainer, "old"}, {rpc.CmdRemoveContainer, "old"}}
	}
	return nil
}

// actions lists the daemon calls a row makes, in order. "new" is the
// Container the row creates, "old" the one it acts on ("image", the row's
// image, is the pull phase's).
func actions(r Row) []action {
	switch r.Op {
	case OpCreate:
		return []action{{rpc.CmdCreateContainer, "new"}, {rpc.CmdStartContainer, "new"}, {rpc.CmdWaitReady, "new"}}
	case OpStart:
		return []action{{rpc.CmdStartContainer, "old"}, {rpc.CmdWaitReady, "old"}}
	case OpStop:
		return []action{{rpc.CmdStopContainer, "old"}}
	case OpRemove:
		return []action{{rpc.CmdStopContainer, "old"}, {rpc.CmdRemoveContainer, "old"}}
	case OpHook:
		return []action{{rpc.CmdCreateContainer, "new"}, {rpc.CmdStartContainer, "new"}, {rpc.CmdWaitReady, "new"}, {rpc.CmdRemoveContainer, "new"}}
	case OpCreateVolume:
		return []action{{rpc.CmdCreateVolume, "volume"}}
	case OpReplace:
		if r.Strategy == StopFirst {
			return []action{{rpc.CmdStopContainer, "old"}, {rpc.CmdCreateContainer, "new"}, {rpc.CmdStartContainer, "new"}, {rpc.CmdWaitReady, "new"}, {rpc.CmdRemoveContainer, "old"}}
		}
		return []action{{rpc.CmdCreateContainer, "new"}, {rpc.CmdStartContainer, "new"}, {rpc.CmdWaitReady, "new"}, {rpc.CmdStopContainer, "old"}, {rpc.CmdRemoveContainer, "old"}}
	}
	return nil
}

type action struct {
	cmd   string
	which string // new, old or image
}

// Run executes the plan's rows as shown. It never re-plans: a failed row
// skips the rest of its Service and of the Services that depend on it;
// cancellation of ctx stops between steps. Every step appears in the
// Outcome.
//
// Services run as soon as the Services they depend on have finished, so
// independent ones run at once; a Service's rows on different Machines
// run at once, and the rows of one Machine one after the other in plan
// order. The Outcome lists steps in plan order. Within a Service, the rows
// that bring Containers up run first; then the Service's Serving Pointer
// moves to the Containers that remain and the executor waits until every
// Machine that is not Down acks it (so no Ingress Proxy routes to a
// Container about to stop); only then do the rows that stop or remove
// Containers run (see serving.go).
func (e *Executor) Run(ctx context.Context, p Plan) Outcome {
	rs := newRunState()
	out := Outcome{DeploymentID: p.DeploymentID}
	out.Steps = e.runServices(ctx, p, rs)
	out.Status = rs.status
	if out.Status == "completed" && out.Count(StepCompleted) != countNonCompensation(out) {
		out.Status = "partial"
	}
	return out
}

// runActs runs acts of row i unless skip is set; it returns the row's
// steps, the new Container's id and whether every action completed.
func (e *Executor) runActs(ctx context.Context, i int, r Row, acts []action, skip string) ([]Step, string, bool) {
	if len(acts) == 0 {
		return nil, "", skip == ""
	}
	if skip != "" {
		var steps []Step
		for _, a := range acts {
			steps = append(steps, e.step(i, r, a, Step{Status: StepNeverAttempted, Error: skip}))
		}
		return steps, "", false
	}
	return e.runRow(ctx, i, r, acts)
}

func countNonCompensation(o Outcome) int {
	n := 0
	for _, s := range o.Steps {
		if !s.Compensation {
			n++
		}
	}
	return n
}

func failedDependency(p Plan, svc string, failed map[string]string) string {
	deps := map[string][]string{}
	for _, s := range p.Services {
		deps[s.Name] = s.DependsOn
	}
	seen := map[string]bool{}
	var walk func(string) string
	walk = func(s string) string {
		for _, d := range deps[s] {
			if seen[d] {
				continue
			}
			seen[d] = true
			if _, ok := failed[d]; ok {
				return d
			}
			if f := walk(d); f != "" {
				return f
			}
		}
		return ""
	}
	return walk(svc)
}

func (e *Executor) step(i int, r Row, a action, s Step) Step {
	s.Row, s.MachineID, s.Machine, s.Service, s.Action = i, r.MachineID, r.Machine, r.Service, a.cmd
	s.Container = r.OldName
	if s.Container == "" {
		s.Container = r.OldID
	}
	switch a.which {
	case "new":
		s.Container = r.NewName
	case "image":
		s.Container = r.Spec.Image
	case "volume":
		s.Container = "volume " + r.Volume
	}
	return s
}

// runRow runs one row's actions; on a failure it compensates and marks
// the rest never attempted.
func (e *Executor) runRow(ctx context.Context, i int, r Row, acts []action) ([]Step, string, bool) {
	var steps []Step
	newID := ""
	created := false
	for k, a := range acts {
		if ctx.Err() != nil {
			for _, rest := range acts[k:] {
				steps = append(steps, e.step(i, r, rest, Step{Status: StepNeverAttempted, Error: "cancelled before it ran"}))
			}
			steps = append(steps, e.compensate(i, r, a, newID, created)...)
			return steps, newID, false
		}
		s := e.step(i, r, a, Step{})
		id := r.OldID
		if a.which == "new" {
			id = newID
		}
		e.emit(s, false)
		start := time.Now()
		s.StartedAt = start.UTC().Format(time.RFC3339)
		tail, err := e.call(ctx, s, r, a, id, &newID)
		s.began, s.took = start, time.Since(start)
		s.DurationMS = s.took.Milliseconds()
		if a.cmd == rpc.CmdCreateContainer && err == nil {
			created = true
		}
		if err != nil {
			s.Status, s.Error, s.LogTail = StepFailed, err.Error(), tail
			if len(tail) == 0 && created && a.which == "new" {
				s.LogTail = e.logTail(r, newID)
			}
			e.emit(s, true)
			steps = append(steps, s)
			for _, rest := range acts[k+1:] {
				steps = append(steps, e.step(i, r, rest, Step{Status: StepNeverAttempted, Error: "an earlier step of this row failed"}))
			}
			steps = append(steps, e.compensate(i, r, a, newID, created)...)
			return steps, newID, false
		}
		s.Status = StepCompleted
		e.emit(s, true)
		steps = append(steps, s)
	}
	return steps, newID, true
}

func (e *Executor) emit(s Step, done bool) {
	if e.Progress != nil {
		e.emitMu.Lock()
		defer e.emitMu.Unlock()
		e.Progress(Event{Step: s, Done: done})
	}
}

// compensate is the narrow compensation of a failed row: a new Container
// that failed is stopped and kept for its logs; the old Container of a
// stop-first replacement is started again when it was running. It runs
// on a fresh context so a Ctrl-C still leaves the old Container serving.
func (e *Executor) compensate(i int, r Row, failedAt action, newID string, created bool) []Step {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []Step
	run := func(a action, id string) {
		s := e.step(i, r, a, Step{Compensation: true})
		e.emit(s, false)
		err := e.containerStep(ctx, rpc.Target{One: r.MachineID}, a.cmd, id, 0)
		s.Status = StepCompleted
		if err != nil {
			s.Status, s.Error = StepFailed, err.Error()
		}
		e.emit(s, true)
		out = append(out, s)
	}
	// Only a failure before the new Container was ready is compensated;
	// after that the new one serves and the row's tail is reported.
	if failedAt.which != "new" || failedAt.cmd == rpc.CmdRemoveContainer {
		return nil
	}
	if created && newID != "" {
		run(action{rpc.CmdStopContainer, "new"}, newID)
	}
	if r.Op == OpReplace && r.Strategy == StopFirst && r.OldRunning {
		run(action{rpc.CmdStartContainer, "old"}, r.OldID)
	}
	return out
}

// containerStep runs the step cmd names on Container id: start, stop
// (after grace seconds) or remove. Their answers are not needed.
func (e *Executor) containerStep(ctx context.Context, t rpc.Target, cmd, id string, grace int) error {
	switch cmd {
	case rpc.CmdStartContainer:
		return rpc.InvokeInto(ctx, e.C, t, rpc.StartContainer, rpc.ContainerRef{ID: id}, nil)
	case rpc.CmdStopContainer:
		return rpc.InvokeInto(ctx, e.C, t, rpc.StopContainer, rpc.StopContainerRequest{ID: id, GracePeriodSeconds: grace}, nil)
	case rpc.CmdRemoveContainer:
		return rpc.InvokeInto(ctx, e.C, t, rpc.RemoveContainer, rpc.RemoveContainerRequest{ID: id}, nil)
	}
	return fmt.Errorf("deploy: %s is not a Container step", cmd)
}

// call makes one daemon call; it returns the log tail of a failed wait.
// A mutating call is never interrupted by cancellation (Ctrl-C takes
// effect between steps, so Docker is never left mid-change by us); only
// a readiness wait or an image pull, which change no Container, is cut
// short.
func (e *Executor) call(ctx context.Context, s Step, r Row, a action, id string, newID *string) ([]string, error) {
	t := rpc.Target{One: r.MachineID}
	if a.cmd == rpc.CmdWaitReady {
		tail, err := e.wait(ctx, r, id)
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("cancelled while waiting for readiness: %w", err)
		}
		return tail, err
	}
	if a.cmd == rpc.CmdPullImage {
		// A pull changes no Container, so Ctrl-C may cut it short.
		req := rpc.PullImageRequest{Image: r.Spec.Image}
		if e.RegistryAuth != nil {
			req.RegistryAuth = e.RegistryAuth(r.Spec.Image)
		}
		if c, ok := e.C.(streamer); ok && e.Progress != nil {
			err := e.pullProgress(ctx, c, s, t, req)
			var re *rpc.Error
			if !errors.As(err, &re) || re.Code != rpc.CodeUnsupported || re.Details["command"] != rpc.CmdPullImageProgress {
				return nil, err
			}
			// A Machine from before pull_image_progress: pull without it.
		}
		return nil, rpc.InvokeInto(ctx, e.C, t, rpc.PullImage, req, nil)
	}
	ctx = context.WithoutCancel(ctx)
	switch a.cmd {
	case rpc.CmdCreateContainer:
		ob, err := rpc.Invoke(ctx, e.C, t, rpc.CreateContainer, e.createRequest(r))
		if err != nil {
			return nil, err
		}
		*newID = ob.ID
		if *newID == "" {
			*newID = r.NewName // Docker accepts the name wherever an id goes
		}
		return nil, nil
	case rpc.CmdStopContainer:
		return nil, e.containerStep(ctx, t, a.cmd, id, r.StopGraceSeconds)
	case rpc.CmdCreateVolume:
		// The Machine makes a volume it creates its Writer.
		return nil, rpc.InvokeInto(ctx, e.C, t, rpc.CreateVolume, rpc.CreateVolumeRequest{Name: r.Volume, SizeBytes: r.SizeBytes}, nil)
	default:
		return nil, e.containerStep(ctx, t, a.cmd, id, 0)
	}
}

// streamer is a Caller that also opens streams, as *rpc.Client does.
type streamer interface {
	rpc.Opener
}

// pullProgress runs a pull as pull_image_progress, telling Progress how
// far it is as the Machine reports it.
func (e *Executor) pullProgress(ctx context.Context, c streamer, s Step, t rpc.Target, req rpc.PullImageRequest) error {
	st, err := rpc.Open(ctx, c, t, rpc.PullImageProgress, req)
	if err != nil {
		return err
	}
	defer st.Close()
	for {
		f, err := st.Recv()
		if err != nil {
			return err
		}
		if f.Done {
			return nil
		}
		if ev, err := rpc.PullImageProgress.Event(f); err == nil && ev.Progress != nil {
			e.emitMu.Lock()
			e.Progress(Event{Step: s, Pull: ev.Progress})
			e.emitMu.Unlock()
		}
	}
}

// wait runs wait_ready. A service Container must end "ready"; a hook
// must end "exited" with code 0 — while it still runs, the daemon may
// answer "ready" (running is ready for readiness none), so a hook is
// waited on again until it exits or its timeout passes.
func (e *Executor) wait(ctx context.Context, r Row, id string) ([]string, error) {
	timeout := e.ReadyTimeout
	if timeout == 0 {
		timeout = 120 * time.Second
	}
	if r.Op == OpHook {
		timeout = time.Duration(r.HookTimeoutSeconds) * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		left := int(time.Until(deadline).Seconds())
		if left < 1 {
			return nil, fmt.Errorf("wait_ready: still running after %s", timeout)
		}
		var res rpc.WaitReadyResult
		if err := rpc.InvokeInto(ctx, e.C, rpc.Target{One: r.MachineID}, rpc.WaitReady, rpc.WaitReadyRequest{ID: id, TimeoutSeconds: left}, &res); err != nil {
			return nil, err
		}
		if r.Op != OpHook {
			if res.Outcome == "ready" {
				return nil, nil
			}
			return res.LogTail, readyErr(res)
		}
		switch {
		case res.Outcome == "exited" && res.ExitCode == 0:
			return nil, nil
		case res.Outcome == "ready":
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
		default:
			return res.LogTail, fmt.Errorf("pre-deploy hook: %w", readyErr(res))
		}
	}
}

func readyErr(res rpc.WaitReadyResult) error {
	msg := "not ready: " + res.Outcome
	if res.Outcome == "exited" || res.ExitCode != 0 {
		msg += fmt.Sprintf(" (exit code %d)", res.ExitCode)
	}
	if res.Message != "" {
		msg += ": " + res.Message
	}
	return errors.New(msg)
}

// logTail is the last lines a failed Container wrote, read from its
// Machine's Log Store (log_history). The store copies Docker's files twice
// a second, so an empty answer is asked once more. When the Machine cannot
// answer (no logstore plugin serving ployz.logs.history.v1, or an older
// ployzd), the report says so in place of the lines, naming the reason.
func (e *Executor) logTail(r Row, id string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := rpc.LogHistoryRequest{LogQuery: rpc.LogQuery{Container: id}, Limit: 20, Newest: true}
	for attempt := 0; ; attempt++ {
		var h rpc.LogHistory
		if err := rpc.InvokeInto(ctx, e.C, rpc.Target{One: r.MachineID}, rpc.ReadLogHistory, req, &h); err != nil {
			return []string{fmt.Sprintf("(output not available: %s: %v)", rpc.CapLogHistory, err)}
		}
		if len(h.Lines) > 0 || attempt == 1 {
			out := make([]string, 0, len(h.Lines))
			for _, l := range h.Lines {
				out = append(out, l.Text)
			}
			return out
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(1500 * time.Millisecond):
		}
	}
}

// createRequest is a row's create_container payload, with the content of
// every file its spec mounts.
func (e *Executor) createRequest(r Row) rpc.CreateContainerRequest {
	req := rpc.CreateContainerRequest{Name: r.NewName, Spec: *r.Spec}
	for _, f := range r.Spec.Files {
		if b, ok := e.Files[f.Digest]; ok {
			if req.Files == nil {
				req.Files = map[string][]byte{}
			}
			req.Files[f.Digest] = b
		}
	}
	return req
}
