package jobs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/store/storetest"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// fakeRunner starts nothing: each Start is counted, and Wait blocks
// until the test ends the run with an exit code.
type fakeRunner struct {
	mu      sync.Mutex
	started []string
	ends    map[string]chan int
}

func (f *fakeRunner) Start(_ context.Context, _ store.JobBody, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, name)
	if f.ends == nil {
		f.ends = map[string]chan int{}
	}
	id := fmt.Sprintf("id-%s", name)
	f.ends[id] = make(chan int, 1)
	return id, nil
}

func (f *fakeRunner) Wait(ctx context.Context, id string) (int, error) {
	f.mu.Lock()
	ch := f.ends[id]
	f.mu.Unlock()
	select {
	case c := <-ch:
		return c, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// end ends every started run with code.
func (f *fakeRunner) end(code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.ends {
		select {
		case ch <- code:
		default:
		}
	}
}

func (f *fakeRunner) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.started)
}

// clock is a settable fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newStore(t *testing.T) *sdkstore.Client {
	n := storetest.Start(t)
	return sdkstore.New(n.API(), sdkstore.WithToken(n.Token()))
}

func putJob(t *testing.T, c *sdkstore.Client, cron, concurrency string, since time.Time) string {
	t.Helper()
	key := store.JobKey("shop-prod", "report")
	b := store.JobBody{Namespace: "shop-prod", Service: "report", Cron: cron, Concurrency: concurrency, Since: since.UnixMilli(), Spec: []byte(`{"image":"x"}`)}
	if _, err := store.Jobs(c).Put(context.Background(), sdkstore.Row[store.JobBody]{Key: key, Owner: "op", Body: b}); err != nil {
		t.Fatal(err)
	}
	return key
}

// setup is a store holding one job of cron, ticking from t0, and a clock
// set to at; the context ends with the test at the latest.
func setup(t *testing.T, cron, concurrency string, at time.Time) (context.Context, context.CancelFunc, *sdkstore.Client, string, *clock) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := newStore(t)
	return ctx, cancel, c, putJob(t, c, cron, concurrency, t0), &clock{t: at}
}

// stop ends ctx and waits for the schedulers' run watchers.
func stop(cancel context.CancelFunc, ss ...*Scheduler) {
	cancel()
	for _, s := range ss {
		s.Wait()
	}
}

func scheduler(c *sdkstore.Client, id string, clk *clock, r Runner) *Scheduler {
	return New(Config{Store: c, MachineID: id, MachineName: id, Runner: r, Now: clk.now})
}

func runs(t *testing.T, c *sdkstore.Client, key string) []store.JobRunBody {
	t.Helper()
	rows, err := store.JobRunsOf(context.Background(), c, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]store.JobRunBody, len(rows))
	for i, r := range rows {
		out[i] = r.Body
	}
	return out
}

// waitStatus polls until the run of tick has status.
func waitStatus(t *testing.T, c *sdkstore.Client, key string, tick time.Time, status string) store.JobRunBody {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		row, ok, err := store.JobRuns(c).Get(context.Background(), store.JobRunKey(key, tick.UnixMilli()))
		if err == nil && ok && row.Body.Status == status {
			return row.Body
		}
		if time.Now().After(deadline) {
			t.Fatalf("run at %v: %+v (ok %v, err %v), want status %s", tick, row.Body, ok, err, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwoSchedulersOneRunPerTick: two Machines' schedulers race over
// the same ticks; each tick is run exactly once, its end recorded with
// the exit code and duration.
func TestTwoSchedulersOneRunPerTick(t *testing.T) {
	ctx, cancel, c, key, clk := setup(t, "* * * * *", ConcurrencyForbid, t0)
	r1, r2 := &fakeRunner{}, &fakeRunner{}
	a, b := scheduler(c, "m1", clk, r1), scheduler(c, "m2", clk, r2)
	for minute := 1; minute <= 5; minute++ {
		tick := t0.Add(time.Duration(minute) * time.Minute)
		clk.set(tick.Add(time.Second))
		var wg sync.WaitGroup
		for _, s := range []*Scheduler{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Round(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got := r1.count() + r2.count(); got != minute {
			t.Fatalf("after tick %d: %d runs started, want %d", minute, got, minute)
		}
		clk.set(tick.Add(3 * time.Second))
		r1.end(minute % 2)
		r2.end(minute % 2)
		want := store.JobRunSucceeded
		if minute%2 == 1 {
			want = store.JobRunFailed
		}
		got := waitStatus(t, c, key, tick, want)
		if got.ExitCode == nil || *got.ExitCode != minute%2 || got.DurationMS != 2000 || got.Container == "" || got.Machine == "" {
			t.Fatalf("tick %d run = %+v", minute, got)
		}
	}
	if rs := runs(t, c, key); len(rs) != 5 {
		t.Fatalf("rows = %+v, want 5", rs)
	}
	stop(cancel, a, b)
}

// TestMissedTicksRecorded: ticks nobody started within the grace period
// (ployzd down) are recorded missed; the current one runs.
func TestMissedTicksRecorded(t *testing.T) {
	ctx, cancel, c, key, clk := setup(t, "*/10 * * * *", ConcurrencyForbid, t0.Add(30*time.Minute+30*time.Second))
	r := &fakeRunner{}
	s := scheduler(c, "m1", clk, r)
	next, err := s.Round(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(t0.Add(40 * time.Minute)) {
		t.Fatalf("next = %v", next)
	}
	rs := runs(t, c, key)
	if len(rs) != 3 || rs[0].Status != store.JobRunMissed || rs[1].Status != store.JobRunMissed || rs[2].Status != store.JobRunRunning || r.count() != 1 {
		t.Fatalf("rows = %+v, started %d", rs, r.count())
	}
	stop(cancel, s)
}

// TestConcurrencyForbidSkips: a tick that comes while the previous run
// still runs is recorded skipped (allow runs it); once the run ended the
// next tick runs again.
func TestConcurrencyForbidSkips(t *testing.T) {
	ctx, cancel, c, key, clk := setup(t, "* * * * *", ConcurrencyForbid, t0.Add(time.Minute+time.Second))
	r := &fakeRunner{}
	a, b := scheduler(c, "m1", clk, r), scheduler(c, "m2", clk, r)
	if _, err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(2*time.Minute + time.Second))
	if _, err := b.Round(ctx); err != nil { // another Machine sees m1's run still running
		t.Fatal(err)
	}
	got := waitStatus(t, c, key, t0.Add(2*time.Minute), store.JobRunSkipped)
	if got.Machine != "m2" || r.count() != 1 {
		t.Fatalf("skipped = %+v, started %d", got, r.count())
	}
	r.end(0)
	waitStatus(t, c, key, t0.Add(time.Minute), store.JobRunSucceeded)
	clk.set(t0.Add(3*time.Minute + time.Second))
	if _, err := b.Round(ctx); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, key, t0.Add(3*time.Minute), store.JobRunRunning)

	putJob(t, c, "* * * * *", ConcurrencyAllow, t0)
	clk.set(t0.Add(4*time.Minute + time.Second))
	if _, err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, key, t0.Add(4*time.Minute), store.JobRunRunning)
	if r.count() != 3 {
		t.Fatalf("started %d, want 3 (allow runs beside the running one)", r.count())
	}
	stop(cancel, a, b)
}

// TestStaleRunLost: a running run whose Machine stopped reporting it no
// longer forbids the next tick, which another Machine runs; the row stays
// its Machine's, and readers answer it lost.
func TestStaleRunLost(t *testing.T) {
	ctx, cancel, c, key, clk := setup(t, "*/5 * * * *", ConcurrencyForbid, t0.Add(5*time.Minute+time.Second))
	dead := &fakeRunner{}
	dctx, dcancel := context.WithCancel(ctx)
	if _, err := scheduler(c, "m1", clk, dead).Round(dctx); err != nil {
		t.Fatal(err)
	}
	dcancel() // m1's ployzd is gone: its run stays "running"
	clk.set(t0.Add(10*time.Minute + time.Second))
	r := &fakeRunner{}
	s := scheduler(c, "m2", clk, r)
	if _, err := s.Round(ctx); err != nil {
		t.Fatal(err)
	}
	old := waitStatus(t, c, key, t0.Add(5*time.Minute), store.JobRunRunning)
	if old.Machine != "m1" || !Stale(old, clk.now(), 0) {
		t.Fatalf("m1's run %+v: want it left to m1 and answered lost", old)
	}
	waitStatus(t, c, key, t0.Add(10*time.Minute), store.JobRunRunning)
	stop(cancel, s)
}

// TestAdmitsNarrows: a Machine that does not admit the job neither runs
// nor records its ticks.
func TestAdmitsNarrows(t *testing.T) {
	c := newStore(t)
	key := putJob(t, c, "* * * * *", ConcurrencyForbid, t0)
	clk := &clock{t: t0.Add(time.Minute + time.Second)}
	r := &fakeRunner{}
	s := New(Config{Store: c, MachineID: "m1", Runner: r, Now: clk.now, Admits: func(context.Context, store.JobBody) bool { return false }})
	if _, err := s.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rs := runs(t, c, key); len(rs) != 0 || r.count() != 0 {
		t.Fatalf("rows %+v, started %d", rs, r.count())
	}
}
