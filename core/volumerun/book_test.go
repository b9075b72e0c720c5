package volumerun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/internal/fakecluster"
)

// beginRun records a run of kind on volume in the Cluster, as a runner
// would begin it (tests seed earlier runs with it).
func (fc *fakeCluster) beginRun(volume, kind, target string) (operator.VolumeRun, error) {
	r, _, err := fc.runner().beginRecord(context.Background(), Copies{Name: volume}, kind, target)
	return r, err
}

// saveRun rewrites a run begun with beginRun.
func (fc *fakeCluster) saveRun(r operator.VolumeRun) error {
	r.Updated = time.Now()
	return (&volumeRun{Runner: fc.runner(), ctx: context.Background(), run: r}).saveRecord()
}

// mirroredDB is a Cluster whose db has its Writer on m1 and a Mirror on
// m2, both holding snapshot run-0: ready to sync.
func mirroredDB(t *testing.T) *fakeCluster {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror})
	fc.snaps("m1", "db", "run-0")
	fc.snaps("m2", "db", "run-0")
	return fc
}

// operatorB is a second operator (its own operator store, as on another
// computer) reaching the same Cluster.
func (fc *fakeCluster) operatorB() *Runner {
	st, entry := fc.NewSession()
	rn := New(entry, st, "lab", operator.Operator{}, fc.events.add)
	rn.Operator, rn.waits = operator.Operator{Name: "bo@other"}, fc.waits
	return rn
}

// TestTwoOperatorsShareVolumeRuns: runs live in the Cluster. Operator
// B's run numbers on from A's, B lists A's runs with A's name, B finishes
// the Move A left failed past its point of no return, and neither
// operator store holds a run.
func TestTwoOperatorsShareVolumeRuns(t *testing.T) {
	fc := mirroredDB(t)
	a := fc.runner()
	a.Operator = operator.Operator{Name: "ana@laptop"}
	if _, err := a.Sync(context.Background(), "db"); err != nil {
		t.Fatalf("A's sync: %v\n%s", err, &fc.events)
	}
	b := fc.operatorB()
	if _, err := b.Sync(context.Background(), "db"); err != nil {
		t.Fatalf("B's sync: %v\n%s", err, &fc.events)
	}
	runs, err := b.Runs(context.Background(), "db", 10)
	if err != nil || len(runs) != 2 || runs[0].Gen != 2 || runs[0].Operator != "bo@other" || runs[1].Gen != 1 || runs[1].Operator != "ana@laptop" ||
		runs[1].State != operator.RunDone || runs[1].Context != "lab" {
		t.Fatalf("B lists %+v, %v; want B's gen 2 then A's gen 1, both done", runs, err)
	}

	// A's Move to m2 failed after its point of no return: m2 is the
	// Writer, A's new Container there was created, never started.
	oldID := fc.container("m1", "shop-production-db-0001", "db", "exited")
	spec := fc.ms["m1"].Ctrs[oldID].Spec
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Mirror, Epoch: 1, Floor: 3})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 2, Floor: 3})
	prev, err := fc.beginRun("db", "move", "m2")
	if err != nil || prev.Gen != 3 {
		t.Fatalf("A's move: gen %d, %v; want 3", prev.Gen, err)
	}
	newID := fc.container("m2", creationKey(spec, "db", prev.Gen, oldID), "db", "created")
	fc.pointTo("m1", oldID)
	prev.State, prev.Source, prev.Stopped = operator.RunFailed, "m1", []string{"shop-production-db-0001"}
	prev.Steps = []operator.RunStep{{Name: "promote", Machine: "m2", Outcome: operator.RunDone}, {Name: "start", Machine: "m2", Outcome: operator.RunFailed}}
	if err := fc.saveRun(prev); err != nil {
		t.Fatal(err)
	}
	res, err := b.Move(context.Background(), "db", "m2", MoveOptions{Grace: time.Second, ReadyTimeout: time.Minute})
	if err != nil || res.Run == nil || res.Run.State != operator.RunDone || res.Run.Finishes != 3 || res.Run.Gen != 4 {
		t.Fatalf("B finishing A's move: %+v %v\n%s", res.Run, err, &fc.events)
	}
	if fc.ms["m2"].Ctrs[newID].State != "running" {
		t.Fatalf("A's Container on m2 is %s, want running", fc.ms["m2"].Ctrs[newID].State)
	}
	if last, ok, _ := a.LastRun(context.Background(), "db", "move"); !ok || last.Gen != 4 || last.Operator != "bo@other" {
		t.Fatalf("A's view of the last move: %+v", last)
	}
	for name, st := range map[string]*operator.Store{"A": a.Store, "B": b.Store} {
		if local, _ := st.VolumeRuns("lab", "", 10); len(local) != 0 {
			t.Errorf("operator %s's store holds %d runs; the Cluster keeps them", name, len(local))
		}
	}
}

// TestOpenRunHeldRefusesOtherOperator: while A's run holds the volume's
// lease, B cannot begin one; once A's lease is gone, B's run marks A's
// open run lost.
func TestOpenRunHeldRefusesOtherOperator(t *testing.T) {
	fc := mirroredDB(t)
	a := fc.runner()
	ctx, release, err := a.lease(context.Background(), "db", "sync")
	if err != nil {
		t.Fatal(err)
	}
	open, _, err := a.beginRecord(ctx, fc.copies("db"), "sync", "")
	if err != nil {
		t.Fatal(err)
	}
	b := fc.operatorB()
	b.Lease = nil // B does not wait for the lease: the run's begin itself refuses
	_, err = b.Sync(context.Background(), "db")
	var e *rpc.Error
	if !errors.As(err, &e) || e.Code != rpc.CodeConflict || !strings.Contains(e.Message, "gen 1") {
		t.Fatalf("B's sync while A's run holds db: %v", err)
	}
	release()
	if r, _, _ := b.LastRun(context.Background(), "db", "sync"); r.Gen != open.Gen || r.State != operator.RunLost {
		t.Fatalf("A's run once its lease went: %+v, want lost", r)
	}
	res, err := fc.operatorB().Sync(context.Background(), "db")
	if err != nil || res.Run.Gen != 2 {
		t.Fatalf("B's sync after A's lease went: %+v %v", res.Run, err)
	}
	if r := fc.VolumeRunsOf("db"); len(r) != 2 || r[1].State != operator.RunLost || !strings.Contains(r[1].Error, "lease") {
		t.Fatalf("the Cluster's runs: %+v, want A's marked lost", r)
	}
}

// TestVolumeRunsOlderEntry: an entry that keeps no Volume Runs (an
// older release) leaves them to the operator store, as before.
func TestVolumeRunsOlderEntry(t *testing.T) {
	fc := newFakeClusterWith(t, fakecluster.Options{NoVolumeRuns: true}, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 1, Floor: 4})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 4})
	fc.snaps("m1", "db", "run-0")
	fc.snaps("m2", "db", "run-0")
	res, err := fc.runner().Sync(context.Background(), "db")
	if err != nil || res.Run.Gen != 5 {
		t.Fatalf("sync: %+v %v", res.Run, err)
	}
	local, _ := fc.Store.VolumeRuns("lab", "db", 10)
	if len(local) != 1 || local[0].State != operator.RunDone {
		t.Fatalf("the operator store's runs: %+v", local)
	}
	if runs, err := fc.runner().Runs(context.Background(), "db", 10); err != nil || len(runs) != 1 || runs[0].Gen != 5 {
		t.Fatalf("runs: %+v %v", runs, err)
	}
}
