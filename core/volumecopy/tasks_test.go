package volumecopy

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// TestAdmitTask: a new task needs the copy at expect and a gen not below
// the floor, and leaves the floor where it is.
func TestAdmitTask(t *testing.T) {
	writer := Copy{Role: Writer, Epoch: 100, Floor: 3}
	for _, c := range []struct {
		name   string
		cur    Copy
		gen    uint64
		expect string
		field  string // refusal's field; "" admitted
		code   string
	}{
		{"writer at its floor", writer, 3, Writer, "", ""},
		{"writer above its floor", writer, 9, Writer, "", ""},
		{"none with no record", Copy{}, 1, None, "", ""},
		{"late gen", writer, 2, Writer, "gen", rpc.CodeFailedPrecond},
		{"role changed", writer, 4, Mirror, "expect", rpc.CodeFailedPrecond},
		{"no record is none", Copy{}, 4, Writer, "expect", rpc.CodeFailedPrecond},
		{"no gen", writer, 0, Writer, "gen", rpc.CodeInvalidArgument},
		{"bad expect", writer, 4, "master", "expect", rpc.CodeInvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := AdmitTask(c.cur, "db", c.gen, c.expect)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *rpc.Error
			if !errors.As(err, &e) || e.Code != c.code || e.Details["field"] != c.field {
				t.Fatalf("got %v, want %s naming %s", err, c.code, c.field)
			}
			if e.Code == rpc.CodeFailedPrecond && e.Details["copy"] != c.cur.View() {
				t.Fatalf("refusal reports copy %v, want %v", e.Details["copy"], c.cur.View())
			}
		})
	}
}

// fakeDocker is the Docker call of a task: it counts its calls and
// answers when released.
type fakeDocker struct {
	calls   atomic.Int32
	release chan error
}

func (f *fakeDocker) run(context.Context) error {
	f.calls.Add(1)
	return <-f.release
}

func newTestTasks() *Tasks {
	ts := NewTasks()
	ts.Wait = 50 * time.Millisecond
	return ts
}

func storeWith(t *testing.T, name string, c Copy) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.write(name, c); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTasksRunDockerOnce: a task answers busy while Docker works, the
// same request joins it (Docker is not called again), a role change of
// the volume is refused as busy meanwhile, and after Docker answers
// every replay reads the recorded result.
func TestTasksRunDockerOnce(t *testing.T) {
	ctx := context.Background()
	s := storeWith(t, "db", Copy{Role: Writer, Epoch: 100, Floor: 4})
	ts := newTestTasks()
	d := &fakeDocker{release: make(chan error, 1)}
	job := Job{Key: TaskKey{Volume: "db", Gen: 4, Kind: rpc.TaskStart, Subject: "c1"}, Timeout: time.Minute, Grant: true, Run: d.run}
	admit := func(start func()) error { return s.Admit(ctx, "db", 4, Writer, start) }

	st, err := ts.Do(ctx, job, admit)
	if err != nil || st.State != rpc.TaskBusy || st.Joined {
		t.Fatalf("first: %+v %v, want busy, not joined", st, err)
	}
	st, err = ts.Do(ctx, job, admit)
	if err != nil || st.State != rpc.TaskBusy || !st.Joined {
		t.Fatalf("again: %+v %v, want busy, joined", st, err)
	}
	if got := ts.Running("db"); len(got) != 1 || got[0] != "start c1 (run gen 4)" {
		t.Fatalf("running: %v", got)
	}
	_, _, err = s.Set(context.Background(), rpc.SetVolumeCopyRequest{Volume: "db", Gen: 4, Expect: Writer, Want: Mirror},
		func() (Facts, error) { return Facts{Exists: true, Busy: ts.Running("db")}, nil })
	var e *rpc.Error
	if !errors.As(err, &e) || e.Details["field"] != "volume" || e.Details["busy"] == nil {
		t.Fatalf("demote under a start in flight: %v, want refused as busy", err)
	}

	d.release <- nil
	<-ts.m[job.Key].done
	if got := ts.Running("db"); len(got) != 0 {
		t.Fatalf("running after Docker answered: %v", got)
	}
	// The role changes now; a replay still reads what Docker answered
	// (it is not admitted again).
	if _, _, err := s.Set(context.Background(), rpc.SetVolumeCopyRequest{Volume: "db", Gen: 5, Expect: Writer, Want: Mirror},
		func() (Facts, error) { return Facts{Exists: true, Busy: ts.Running("db")}, nil }); err != nil {
		t.Fatalf("demote after the task: %v", err)
	}
	st, err = ts.Do(ctx, job, admit)
	if err != nil || st.State != rpc.TaskDone || !st.Joined {
		t.Fatalf("replay: %+v %v, want done", st, err)
	}
	if n := d.calls.Load(); n != 1 {
		t.Fatalf("Docker called %d times, want once", n)
	}
	// A new task for the same Container is admitted afresh: refused,
	// the copy is a Mirror now.
	job.Key.Gen = 5
	if _, err := ts.Do(ctx, job, func(start func()) error { return s.Admit(ctx, "db", 5, Writer, start) }); !errors.As(err, &e) || e.Details["field"] != "expect" {
		t.Fatalf("new task on the Mirror: %v, want refused naming expect", err)
	}
	if n := d.calls.Load(); n != 1 {
		t.Fatalf("a refused task called Docker (%d calls)", n)
	}
}

// TestTasksFailedAndForgotten: Docker's failure is recorded with its
// code and replayed, never retried; a result older than Keep is dropped
// and the step runs again (docker stop, start and pull are idempotent).
func TestTasksFailedAndForgotten(t *testing.T) {
	ctx := context.Background()
	s := storeWith(t, "db", Copy{Role: Writer, Floor: 2})
	ts := newTestTasks()
	d := &fakeDocker{release: make(chan error, 2)}
	d.release <- rpc.Errorf(rpc.CodeNotFound, "no Container c9")
	job := Job{Key: TaskKey{Volume: "db", Gen: 2, Kind: rpc.TaskStop, Subject: "c9"}, Timeout: time.Minute, Grant: true, Run: d.run}
	admit := func(start func()) error { return s.Admit(ctx, "db", 2, Writer, start) }
	for i := range 2 {
		st, err := ts.Do(ctx, job, admit)
		if err != nil || st.State != rpc.TaskFailed || st.Code != rpc.CodeNotFound || st.Error != "no Container c9" || st.Joined != (i == 1) {
			t.Fatalf("answer %d: %+v %v", i, st, err)
		}
	}
	if n := d.calls.Load(); n != 1 {
		t.Fatalf("Docker called %d times, want once (no retry)", n)
	}
	ts.Keep = 0
	d.release <- nil
	st, err := ts.Do(ctx, job, admit)
	if err != nil || st.State != rpc.TaskDone || st.Joined || d.calls.Load() != 2 {
		t.Fatalf("after Keep: %+v %v (%d calls), want a new task done", st, err, d.calls.Load())
	}
}

// TestTasksBounded: a task's context is its own, bounded by its Timeout:
// the request's ending does not end it, the Timeout does.
func TestTasksBounded(t *testing.T) {
	s := storeWith(t, "db", Copy{Role: None})
	ts := newTestTasks()
	reqCtx, cancel := context.WithCancel(context.Background())
	cancel()
	job := Job{Key: TaskKey{Volume: "db", Gen: 1, Kind: rpc.TaskPull, Subject: "app:1"}, Timeout: 100 * time.Millisecond,
		Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	st, err := ts.Do(reqCtx, job, func(start func()) error { return s.Admit(reqCtx, "db", 1, None, start) })
	if err != nil || st.State != rpc.TaskBusy {
		t.Fatalf("a cancelled request: %+v %v, want busy (the task goes on)", st, err)
	}
	if got := ts.Running("db"); len(got) != 0 {
		t.Fatalf("a pull holds the mount grant: %v", got)
	}
	<-ts.m[job.Key].done
	st, _ = ts.Do(context.Background(), job, nil)
	if st.State != rpc.TaskFailed || st.ElapsedSeconds < 0.1 {
		t.Fatalf("after its Timeout: %+v, want failed", st)
	}
}
