package volumerun

import (
	"errors"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// containerTask is one Container step of a Volume Run on one Machine
// (docker stop, start or pull): a volume_task the Machine admits against
// its copy (role expect) and runs for as long as Docker takes, asked
// again while it answers busy. A Machine older than volume_task gets the
// plain command, direct.
type containerTask struct {
	machine, expect string
	what            string // for progress lines: "docker stop web-ab12"
	req             rpc.VolumeTaskRequest
	direct          func() error
}

// runTask drives t until Docker answers; it gives up only when the run's
// context ends (the task on the Machine goes on to its own bound).
func (r *volumeRun) runTask(t containerTask) error {
	if !r.servesTasks(t.machine) {
		return t.direct()
	}
	req := t.req
	req.Volume, req.Gen, req.Expect = r.run.Volume, r.run.Gen, t.expect
	var took time.Duration
	busy := false // the Machine has the task
	cancelled := func() error {
		return fmt.Errorf("%s on %s: still busy after %s when the run was cancelled (the Machine lets Docker finish): %w", t.what, t.machine, took.Round(time.Second), r.ctx.Err())
	}
	answered := time.Now()
	for {
		asked := time.Now()
		var st rpc.VolumeTaskState
		if err := rpc.InvokeInto(r.ctx, r.Entry, rpc.Target{One: t.machine}, rpc.VolumeTask, req, &st); err != nil {
			switch {
			case busy && r.ctx.Err() != nil:
				return cancelled()
			case busy && noAnswer(err) && time.Since(answered) < r.waits.noAnswerFor:
				r.progress(t.machine, fmt.Sprintf("%s: %s (no answer: %v; asking again)", t.machine, t.what, err))
				if !r.pause(asked.Add(r.waits.askEvery)) {
					return cancelled()
				}
				continue
			}
			return err
		}
		answered = time.Now()
		took = time.Duration(st.ElapsedSeconds * float64(time.Second))
		shown := took.Round(100 * time.Millisecond)
		if st.State == rpc.TaskBusy {
			shown = took.Round(time.Second)
		}
		r.progress(t.machine, fmt.Sprintf("%s: %s (%s, %s)", t.machine, t.what, st.State, shown))
		switch st.State {
		case rpc.TaskDone:
			return nil
		case rpc.TaskFailed:
			code := st.Code
			if code == "" {
				code = rpc.CodeInternal
			}
			return rpc.Errorf(code, "%s on %s: %s", t.what, t.machine, st.Error)
		}
		// busy, or a state this library does not know: ask again.
		busy = true
		if !r.pause(asked.Add(r.waits.askEvery)) {
			return cancelled()
		}
	}
}

// pause waits until until, false when the run is cancelled first.
func (r *volumeRun) pause(until time.Time) bool {
	select {
	case <-r.ctx.Done():
		return false
	case <-time.After(time.Until(until)):
		return true
	}
}

// noAnswer: err says the Machine did not answer (not that it refused).
func noAnswer(err error) bool {
	var re *rpc.Error
	return !errors.As(err, &re) || re.Code == rpc.CodeUnavailable
}

// servesTasks reports whether machine serves volume_task; only a yes is
// remembered, so a Machine that did not answer is asked again.
func (r *volumeRun) servesTasks(machine string) bool {
	if r.tasks[machine] {
		return true
	}
	if !serves(r.ctx, r.Entry, machine, rpc.CapVolumeTask) {
		return false
	}
	if r.tasks == nil {
		r.tasks = map[string]bool{}
	}
	r.tasks[machine] = true
	return true
}

// start starts Container id (name) on machine, whose copy is the Writer:
// an undo's on the source, or the new Writer's.
func (r *volumeRun) start(machine, name, id string) error {
	ref := rpc.ContainerRef{ID: id}
	return r.runTask(containerTask{machine: machine, expect: volumecopy.Writer, what: "docker start " + name,
		req: rpc.VolumeTaskRequest{Kind: rpc.TaskStart, Start: &ref},
		direct: func() error {
			return rpc.InvokeInto(r.ctx, r.Entry, rpc.Target{One: machine}, rpc.StartContainer, ref, nil)
		}})
}

// stop stops Container id (name) at a cut on machine, whose copy is the
// Writer, giving it grace; a done stop is recorded in the run.
func (r *volumeRun) stop(machine, name, id string, grace time.Duration) error {
	req := rpc.StopContainerRequest{ID: id, GracePeriodSeconds: int(grace.Seconds())}
	return r.step("stop", machine, func(st *operator.RunStep) error {
		st.Detail = name
		err := r.runTask(containerTask{machine: machine, expect: volumecopy.Writer, what: "docker stop " + name,
			req: rpc.VolumeTaskRequest{Kind: rpc.TaskStop, Stop: &req},
			direct: func() error {
				return rpc.InvokeInto(r.ctx, r.Entry, rpc.Target{One: machine}, rpc.StopContainer, req, nil)
			}})
		if err == nil {
			r.run.Stopped = append(r.run.Stopped, name)
		}
		return err
	})
}
