package volumerun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// TestRunsRecordHistory: a Runner that names its operator records each
// run it ends in the Cluster's history, an undone (failed) one too; one
// that names none records nothing.
func TestRunsRecordHistory(t *testing.T) {
	fc, _ := releaseCluster(t, "m2")
	fc.fastAsks()
	fc.failSend = map[string]bool{"run-1-cut": true}
	fc.waits.token = 100 * time.Millisecond
	rn := fc.runner()
	rn.Operator = operator.Operator{Name: "ana@laptop", KeyFingerprint: "SHA256:k"}
	if _, err := rn.Release(context.Background(), "db", ReleaseOptions{}); err == nil {
		t.Fatal("a release whose cut send fails succeeded")
	}
	fc.failSend = nil
	if _, err := rn.Release(context.Background(), "db", ReleaseOptions{}); err != nil {
		t.Fatal(err)
	}
	history := fc.History() // newest first
	if len(history) != 2 {
		t.Fatalf("history %+v, want two runs", history)
	}
	for i, want := range []struct{ outcome, detail string }{
		{rpc.OutcomeFailed, "release run of volume db, gen 1: undone: "},
		{rpc.OutcomeCompleted, "release run of volume db, gen 2: done"},
	} {
		e := history[len(history)-1-i]
		if e.Kind != rpc.HistoryVolumeRun || e.Outcome != want.outcome || !strings.HasPrefix(e.Detail, want.detail) ||
			e.Operator.Name != "ana@laptop" || e.Operator.KeyFingerprint != "SHA256:k" || e.FinishedAt < e.StartedAt || e.StartedAt == 0 {
			t.Errorf("entry %d: %+v, want %s %q", i, e, want.outcome, want.detail)
		}
	}
	fc.runner().Release(context.Background(), "db", ReleaseOptions{}) // nothing to do
	if h := fc.History(); len(h) != 2 {
		t.Fatalf("a runner naming no operator recorded %+v", h)
	}
}
