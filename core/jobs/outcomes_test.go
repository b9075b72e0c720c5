package jobs

import (
	"reflect"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/observe"
)

// TestOutcomesCounted: every final status a Scheduler records reaches
// Config.Outcome exactly once; Outcomes counts them per job, keeps the
// last run's status and when the last success ended.
func TestOutcomesCounted(t *testing.T) {
	ctx, cancel, c, key, clk := setup(t, "*/10 * * * *", ConcurrencyForbid, t0.Add(30*time.Minute+30*time.Second))
	var o Outcomes
	r := &fakeRunner{}
	s := New(Config{Store: c, MachineID: "m1", Runner: r, Now: clk.now, Outcome: o.Record})
	want := func(byStatus map[string]int64, last string, success time.Time) {
		t.Helper()
		w := []observe.JobRuns{{Namespace: "shop-prod", Service: "report", ByStatus: byStatus, LastStatus: last}}
		if !success.IsZero() {
			w[0].LastSuccess = success.UnixMilli()
		}
		deadline := time.Now().Add(5 * time.Second)
		for !reflect.DeepEqual(o.Snapshot(), w) {
			if time.Now().After(deadline) {
				t.Fatalf("outcomes %+v, want %+v", o.Snapshot(), w)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := s.Round(ctx); err != nil {
		t.Fatal(err)
	}
	want(map[string]int64{store.JobRunMissed: 2}, store.JobRunMissed, time.Time{})
	r.end(1)
	waitStatus(t, c, key, t0.Add(30*time.Minute), store.JobRunFailed)
	want(map[string]int64{store.JobRunMissed: 2, store.JobRunFailed: 1}, store.JobRunFailed, time.Time{})

	clk.set(t0.Add(40*time.Minute + time.Second))
	if _, err := s.Round(ctx); err != nil {
		t.Fatal(err)
	}
	ended := t0.Add(40*time.Minute + 5*time.Second)
	clk.set(ended)
	r.end(0)
	waitStatus(t, c, key, t0.Add(40*time.Minute), store.JobRunSucceeded)
	want(map[string]int64{store.JobRunMissed: 2, store.JobRunFailed: 1, store.JobRunSucceeded: 1}, store.JobRunSucceeded, ended)

	if _, err := s.Round(ctx); err != nil { // nothing new: nothing counted again
		t.Fatal(err)
	}
	want(map[string]int64{store.JobRunMissed: 2, store.JobRunFailed: 1, store.JobRunSucceeded: 1}, store.JobRunSucceeded, ended)
	stop(cancel, s)
}

// TestOutcomesSkippedKeepsLastStatus: a skipped tick is counted but is
// not a run, so the last run's status stands.
func TestOutcomesSkippedKeepsLastStatus(t *testing.T) {
	var o Outcomes
	o.Record(store.JobRunBody{Job: "a/b", Status: store.JobRunFailed})
	o.Record(store.JobRunBody{Job: "a/b", Status: store.JobRunSkipped})
	got := o.Snapshot()
	if len(got) != 1 || got[0].LastStatus != store.JobRunFailed || got[0].ByStatus[store.JobRunSkipped] != 1 || got[0].Namespace != "a" || got[0].Service != "b" {
		t.Fatalf("outcomes %+v", got)
	}
	var none Outcomes
	if none.Snapshot() != nil {
		t.Fatal("no runs, want no entries")
	}
}
