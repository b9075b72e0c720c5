package volprotect

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRuns is the Volume Run library as a fake: there is no ZFS outside
// the VM lab, so Level stands in for the run (core/volumerun's own tests
// drive the real steps against a fake Cluster). A run that succeeds
// lands a sync on its first candidate at the test clock's time, as a
// done send step would in the Cluster's runs.
type fakeRuns struct {
	mu      sync.Mutex
	now     func() time.Time
	calls   []string
	fail    error
	block   chan struct{} // when set, each run waits on it (or its ctx)
	running int
	most    int // the most runs in flight at once
	lags    map[string][]Lag
	gen     uint64
}

func (f *fakeRuns) Level(ctx context.Context, volume string, candidates []string) (uint64, error) {
	f.mu.Lock()
	f.calls = append(f.calls, volume+"->"+strings.Join(candidates, ","))
	f.running++
	f.most = max(f.most, f.running)
	f.gen++
	gen, block := f.gen, f.block
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.running--; f.mu.Unlock() }()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return gen, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return gen, f.fail
	}
	f.lags[volume] = []Lag{{Machine: candidates[0], Gen: gen, Kind: "sync", Synced: f.now()}}
	return gen, nil
}

func (f *fakeRuns) Lags(_ context.Context, volume string) ([]Lag, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lags[volume], nil
}

func (f *fakeRuns) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// mirrorRig is a Mirrorer on m1 with a test clock: db's Mirror on m2
// every 15 minutes, last synced at start.
type mirrorRig struct {
	now    time.Time
	writer string // the Machine holding db's Writer
	runs   *fakeRuns
	m      *Mirrorer
}

func newMirrorRig(t *testing.T) *mirrorRig {
	start := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	r := &mirrorRig{now: start, writer: "m1"}
	r.runs = &fakeRuns{now: func() time.Time { return r.now }, lags: map[string][]Lag{"db": {{Machine: "m2", Gen: 1, Kind: "mirror", Synced: start}}}}
	r.m = NewMirrorer(MirrorConfig{
		Self: "m1",
		Policies: func(context.Context) ([]Declared, error) {
			return []Declared{{Volume: "db", Policy: Policy{Mirror: &Mirror{Machine: "m2", Every: "15m"}}},
				{Volume: "logs", Policy: Policy{Snapshots: Retention{Hourly: 1}}}}, nil
		},
		IsWriter: func(v string) bool { return r.writer == "m1" },
		Lags:     r.runs.Lags,
		Machines: func(context.Context) ([]Machine, error) {
			return []Machine{{Name: "m1"}, {Name: "m2"}, {Name: "m3"}}, nil
		},
		Runs: r.runs,
		Now:  func() time.Time { return r.now },
	})
	t.Cleanup(r.m.Wait)
	return r
}

// round runs one Round at the rig's clock and waits for what it started.
func (r *mirrorRig) round(t *testing.T) time.Time {
	t.Helper()
	next, err := r.m.Round(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.m.Wait()
	return next
}

// TestMirrorerSyncsWhenLagExceedsEvery: no run while the Mirror is
// younger than every (Round says when it will be due), one run once it
// is that old, then none until it is again; a volume without a mirror
// is never synced.
func TestMirrorerSyncsWhenLagExceedsEvery(t *testing.T) {
	r := newMirrorRig(t)
	r.now = r.now.Add(14 * time.Minute)
	if next := r.round(t); r.runs.count() != 0 || !next.Equal(r.now.Add(time.Minute)) {
		t.Fatalf("at 14 min behind: %d runs, next %v", r.runs.count(), next)
	}
	r.now = r.now.Add(time.Minute)
	r.round(t)
	if r.runs.count() != 1 || r.runs.calls[0] != "db->m2" {
		t.Fatalf("at 15 min behind: runs %v, want one sync of db to m2", r.runs.calls)
	}
	r.now = r.now.Add(10 * time.Minute)
	if next := r.round(t); r.runs.count() != 1 || !next.Equal(r.now.Add(5*time.Minute)) {
		t.Fatalf("10 min after the sync: runs %v, next %v", r.runs.calls, next)
	}
	// Rounds every minute over two hours: one run per 15 minutes.
	for range 120 {
		r.now = r.now.Add(time.Minute)
		r.round(t)
	}
	if got := r.runs.count(); got != 1+8 {
		t.Errorf("two hours of rounds: %d runs, want 9 (%v)", got, r.runs.calls)
	}
}

// TestMirrorerOneAtATime: a run still going when the next round comes
// (and its Mirror is due again) is not started twice.
func TestMirrorerOneAtATime(t *testing.T) {
	r := newMirrorRig(t)
	r.runs.block = make(chan struct{})
	r.now = r.now.Add(20 * time.Minute)
	for range 5 {
		if _, err := r.m.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.now = r.now.Add(20 * time.Minute)
	}
	close(r.runs.block)
	r.m.Wait()
	if r.runs.count() != 1 || r.runs.most != 1 {
		t.Fatalf("five rounds over a slow run: %d runs, %d at once; want one", r.runs.count(), r.runs.most)
	}
}

// TestMirrorerFailureBacksOff: a failed run is retried after 1, 2, 4,
// 8 minutes, then every 15 (the Mirror's every), never in between; the
// failure and its error are reported; a success clears them.
func TestMirrorerFailureBacksOff(t *testing.T) {
	r := newMirrorRig(t)
	r.runs.fail = errors.New("send: m2: connection refused")
	r.now = r.now.Add(15 * time.Minute)
	var at []int // minutes since the first failure of each run
	first := r.now
	for range 60 {
		before := r.runs.count()
		r.round(t)
		if r.runs.count() > before {
			at = append(at, int(r.now.Sub(first)/time.Minute))
		}
		r.now = r.now.Add(30 * time.Second)
	}
	want := []int{0, 1, 3, 7, 15}
	if len(at) != len(want) {
		t.Fatalf("runs at minutes %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("runs at minutes %v, want %v", at, want)
		}
	}
	if n, err := r.m.Failing("db"); n != 5 || err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("failing: %d, %v", n, err)
	}
	r.runs.fail = nil
	r.now = r.now.Add(15 * time.Minute)
	r.round(t)
	if n, err := r.m.Failing("db"); n != 0 || err != nil {
		t.Fatalf("after a success: %d, %v", n, err)
	}
	if got := Backoff(30, time.Hour); got != time.Hour {
		t.Errorf("backoff after 30 failures with every 1h: %v", got)
	}
}

// TestMirrorerBusyIsNotAFailure: a run refused because another holds
// the volume is tried at the next round, not backed off.
func TestMirrorerBusyIsNotAFailure(t *testing.T) {
	r := newMirrorRig(t)
	r.runs.fail = &BusyError{Err: errors.New("volume:db is held by ana running \"volume move\"")}
	r.now = r.now.Add(15 * time.Minute)
	r.round(t)
	r.now = r.now.Add(time.Minute)
	r.round(t)
	if n, _ := r.m.Failing("db"); r.runs.count() != 2 || n != 0 {
		t.Fatalf("busy twice: %d runs, %d failures", r.runs.count(), n)
	}
}

// TestMirrorerWriterMoved: once db's Writer is on another Machine this
// one starts no run however old the Mirror, and a run in flight when
// the Writer left is cancelled.
func TestMirrorerWriterMoved(t *testing.T) {
	r := newMirrorRig(t)
	r.runs.block = make(chan struct{})
	r.now = r.now.Add(15 * time.Minute)
	if _, err := r.m.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.writer = "m3" // a Move made m3 the Writer
	r.now = r.now.Add(time.Hour)
	r.round(t) // cancels the run in flight; Wait returns only once it ended
	for range 10 {
		r.now = r.now.Add(time.Hour)
		r.round(t)
	}
	if r.runs.count() != 1 {
		t.Fatalf("runs after the Writer moved: %v", r.runs.calls)
	}
	if n, _ := r.m.Failing("db"); n != 0 {
		t.Fatalf("a volume no longer here keeps %d failures", n)
	}
}

// TestMirrorerFirstMirrorAndLabels: with no sync on record the Mirror
// is due at once; labels pick the candidates (never this Machine), and
// none matching is reported naming the selector.
func TestMirrorerFirstMirrorAndLabels(t *testing.T) {
	r := newMirrorRig(t)
	r.runs.lags = map[string][]Lag{}
	r.m.cfg.Policies = func(context.Context) ([]Declared, error) {
		return []Declared{{Volume: "db", Policy: Policy{Mirror: &Mirror{Labels: map[string]string{"zone": "b"}, Every: "15m"}}}}, nil
	}
	r.m.cfg.Machines = func(context.Context) ([]Machine, error) {
		return []Machine{{Name: "m1", Labels: map[string]string{"zone": "b"}}, {Name: "m4", Labels: map[string]string{"zone": "b"}}, {Name: "m3", Labels: map[string]string{"zone": "b"}}, {Name: "m2"}}, nil
	}
	r.round(t)
	if len(r.runs.calls) != 1 || r.runs.calls[0] != "db->m3,m4" {
		t.Fatalf("first round: %v", r.runs.calls)
	}
	r.m.cfg.Machines = func(context.Context) ([]Machine, error) { return []Machine{{Name: "m1"}}, nil }
	r.now = r.now.Add(time.Hour)
	if _, err := r.m.Round(context.Background()); err == nil || !strings.Contains(err.Error(), "volume db: mirror: no participating Machine is labels zone=b") {
		t.Fatalf("no candidate: %v", err)
	}
}
