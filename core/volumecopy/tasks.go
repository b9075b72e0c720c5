package volumecopy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// The Container steps of a Volume Run (a docker stop at the cut, a docker
// start of an undo or on the new Writer, a pull on the target) take as
// long as Docker decides, which a caller's deadline cannot know. So each
// runs in a task on this Machine, admitted once against this Machine's
// copy, that outlives the request: the request answers within Wait, busy
// while Docker works, and the same request again joins the task or reads
// what Docker answered. Docker runs once per task; a task never retries
// nor starts other work.
//
// Results live in memory only: a daemon restart forgets them, and the
// request after it starts the step again, which is safe because docker
// stop, start and pull of what is already stopped, running or pulled
// change nothing.

// TaskKey names one task: one Docker call of one Volume Run's step.
type TaskKey struct {
	Volume string
	Gen    uint64
	Kind   string // rpc.TaskStop, rpc.TaskStart or rpc.TaskPull
	// Subject is the Container (stop, start) or the image (pull).
	Subject string
}

func (k TaskKey) String() string {
	return fmt.Sprintf("%s %s (run gen %d)", k.Kind, k.Subject, k.Gen)
}

// Job is a task to start: its Docker call, bounded by Timeout on a
// context of its own (not the request's).
type Job struct {
	Key     TaskKey
	Timeout time.Duration
	// Grant: while it runs the task holds the volume's mount grant, and
	// set_volume_copy refuses to change the copy's role (a Writer is not
	// demoted under a start in flight). A pull mounts nothing.
	Grant bool
	Run   func(ctx context.Context) error
}

// Tasks is this Machine's table of Volume Run tasks.
type Tasks struct {
	// Wait is how long a request waits on its task before answering busy.
	Wait time.Duration
	// Keep is how long a finished task's result is kept for a replay.
	Keep time.Duration
	// Base is the context tasks run under (the daemon's), or Background.
	Base context.Context
	// Ended, when set, hears each task's end (for the daemon's log).
	Ended func(key TaskKey, err error, took time.Duration)

	mu sync.Mutex
	m  map[TaskKey]*task
}

type task struct {
	grant   bool
	started time.Time
	done    chan struct{}
	// Set before done closes.
	ended time.Time
	err   error
}

// NewTasks is a table answering within 3 s and keeping results an hour.
func NewTasks() *Tasks {
	return &Tasks{Wait: 3 * time.Second, Keep: time.Hour}
}

// Do answers the task j names: joined when one exists (running or
// finished), else started if admit, called with the function that starts
// it, calls that function (a Store's Admit does, under its lock). It
// waits up to Wait, or until ctx ends, for the task to finish.
func (ts *Tasks) Do(ctx context.Context, j Job, admit func(start func()) error) (rpc.VolumeTaskState, error) {
	t, joined := ts.find(j.Key)
	if t == nil {
		var err error
		if err = admit(func() { t, joined = ts.start(j) }); err != nil {
			return rpc.VolumeTaskState{}, err
		}
		if t == nil {
			return rpc.VolumeTaskState{}, rpc.Errorf(rpc.CodeInternal, "task %s was admitted but not started", j.Key)
		}
	}
	wait := time.NewTimer(ts.Wait)
	defer wait.Stop()
	select {
	case <-t.done:
	case <-wait.C:
	case <-ctx.Done():
	}
	return t.state(j.Key, joined), nil
}

// Running names the tasks holding volume's mount grant now (none for a
// nil table).
func (ts *Tasks) Running(volume string) []string {
	if ts == nil {
		return nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for k, t := range ts.m {
		if k.Volume == volume && t.grant && t.ended.IsZero() {
			out = append(out, k.String())
		}
	}
	return out
}

// find is the task of key, dropping results older than Keep first.
func (ts *Tasks) find(key TaskKey) (*task, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for k, t := range ts.m {
		if !t.ended.IsZero() && time.Since(t.ended) > ts.Keep {
			delete(ts.m, k)
		}
	}
	t := ts.m[key]
	return t, t != nil
}

// start runs j unless a request that raced this one already did (then
// this one joins it).
func (ts *Tasks) start(j Job) (*task, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.m[j.Key]; t != nil {
		return t, true
	}
	if ts.m == nil {
		ts.m = map[TaskKey]*task{}
	}
	t := &task{grant: j.Grant, started: time.Now(), done: make(chan struct{})}
	ts.m[j.Key] = t
	base := ts.Base
	if base == nil {
		base = context.Background()
	}
	go func() {
		ctx, cancel := context.WithTimeout(base, j.Timeout)
		defer cancel()
		err := j.Run(ctx)
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (Docker did not answer within %s)", err, j.Timeout)
		}
		ts.mu.Lock()
		t.err, t.ended = err, time.Now()
		ts.mu.Unlock()
		close(t.done)
		if ts.Ended != nil {
			ts.Ended(j.Key, err, t.ended.Sub(t.started))
		}
	}()
	return t, false
}

// state is t as volume_task answers it.
func (t *task) state(key TaskKey, joined bool) rpc.VolumeTaskState {
	st := rpc.VolumeTaskState{Volume: key.Volume, Gen: key.Gen, Kind: key.Kind, Subject: key.Subject, Joined: joined, State: rpc.TaskBusy}
	select {
	case <-t.done:
	default:
		st.ElapsedSeconds = seconds(time.Since(t.started))
		return st
	}
	st.ElapsedSeconds = seconds(t.ended.Sub(t.started))
	st.State = rpc.TaskDone
	if t.err != nil {
		st.State, st.Error, st.Code = rpc.TaskFailed, t.err.Error(), rpc.CodeInternal
		var re *rpc.Error
		if errors.As(t.err, &re) {
			st.Error, st.Code = re.Message, re.Code
		}
	}
	return st
}

func seconds(d time.Duration) float64 { return d.Round(time.Millisecond).Seconds() }

// AdmitTask admits a new task on volume for run gen against this
// Machine's copy cur: the copy must have role expect and gen must not be
// below its floor. It checks the floor and does not raise it (only
// set_volume_copy does). A refusal names the field, with the copy.
func AdmitTask(cur Copy, volume string, gen uint64, expect string) error {
	// A task keeps the copy as it is: expect is also what it wants.
	if err := validate(rpc.SetVolumeCopyRequest{Volume: volume, Gen: gen, Expect: expect, Want: expect}); err != nil {
		return err
	}
	if err := checkFloor(cur, gen, volume); err != nil {
		return err
	}
	if have := cur.RoleOf(); have != expect {
		return refuse(cur, "expect", "volume %q's copy here is %s, not %s: it changed since the Volume Run looked",
			volume, have, expect)
	}
	return nil
}

// Admit runs AdmitTask against volume's copy and, when it admits, start,
// in the volume's turn: a set_volume_copy (which reads the running tasks
// in the same turn) sees the task or came before it. It waits for the
// turn until ctx ends.
func (s *Store) Admit(ctx context.Context, volume string, gen uint64, expect string, start func()) error {
	release, err := s.turn(ctx, volume)
	if err != nil {
		return err
	}
	defer release()
	if err := AdmitTask(s.Get(volume), volume, gen, expect); err != nil {
		return err
	}
	start()
	return nil
}
