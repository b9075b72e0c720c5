package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
)

// localRuns records runs in a store only, as a release before the
// Cluster kept them did: a done mirror and a failed move of db, and a
// sync of logs.
func localRuns(t *testing.T, st *operator.Store) {
	t.Helper()
	t0 := time.Now().Add(-time.Hour)
	for i, r := range []struct{ vol, kind, state string }{{"db", "mirror", operator.RunDone}, {"db", "move", operator.RunFailed}, {"logs", "sync", operator.RunDone}} {
		run, err := st.BeginVolumeRun("lab", r.vol, r.kind, "m2", t0.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		run.State, run.Steps = r.state, []operator.RunStep{{Name: "send", Machine: "m2", Outcome: r.state}}
		if err := st.SaveVolumeRun(run); err != nil {
			t.Fatal(err)
		}
	}
}

// TestImportVolumeRunsOnce: a store whose Saved State an earlier
// release already imported still has its Volume Runs moved, once: the
// report counts them, a second import moves nothing, and the Cluster
// holds each run once with its steps.
func TestImportVolumeRunsOnce(t *testing.T) {
	fc, _ := newFake(t, "m1")
	ctx := context.Background()
	st, ent := fc.NewSession()
	localRuns(t, st)
	if err := st.MarkImportedToCluster("lab", time.Now()); err != nil { // the earlier release's import
		t.Fatal(err)
	}
	s := New(st, ent, "lab")
	rep, err := s.ImportLocalState(ctx)
	if err != nil || !rep.Done || rep.Already || rep.VolumeRuns != 3 || rep.Revisions != 0 {
		t.Fatalf("first import: %+v, %v", rep, err)
	}
	if !strings.Contains(rep.String(), "3 Volume Run(s)") {
		t.Fatalf("report %q", rep.String())
	}
	again, err := s.ImportLocalState(ctx)
	if err != nil || again.Moved() || !again.Already {
		t.Fatalf("second import: %+v, %v", again, err)
	}
	db := fc.VolumeRunsOf("db")
	if fc.VolumeRunCount() != 3 || len(db) != 2 || db[0].Gen != 2 || db[0].Kind != "move" || db[0].State != operator.RunFailed ||
		!strings.Contains(string(db[0].Run), `"send"`) || db[0].Operator.Name == "" {
		t.Fatalf("the Cluster's runs: %d, db %+v", fc.VolumeRunCount(), db)
	}

	// Another computer's store holding the same volumes and gens moves
	// nothing: the Cluster keeps the first run of each gen.
	st2, ent2 := fc.NewSession()
	localRuns(t, st2)
	rep2, err := New(st2, ent2, "lab").ImportLocalState(ctx)
	if err != nil || rep2.VolumeRuns != 0 || fc.VolumeRunCount() != 3 {
		t.Fatalf("another store with the same gens: %+v %v, Cluster holds %d", rep2, err, fc.VolumeRunCount())
	}
}
