package volumerun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/leasehold"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/volumecopy"
)

// TestLevel: the scheduled Sync's run is the library's own: a Sync when
// a candidate holds a Mirror, recorded in the Cluster as its operator;
// a candidate holding a copy of another role is no Mirror target; a
// volume whose lease another holds is refused before a run opens,
// naming the holder. (The fake Cluster does not model a full receive
// creating the volume, so the first Mirror run is the lab's to show.)
func TestLevel(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2", "m3")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror})
	fc.snaps("m1", "db", "run-0")
	fc.snaps("m2", "db", "run-0")
	fc.volume("m3", "db", volumecopy.Copy{}) // a copy of no role: not a candidate
	rn := fc.runner()
	rn.Operator = operator.Operator{Name: "schedule@m1"}
	ctx := context.Background()
	if _, err := rn.Level(ctx, "db", []string{"m3"}); err == nil || !strings.Contains(err.Error(), "mirror: none of [m3] can take a Mirror of db") {
		t.Fatalf("m3 holds another copy: %v", err)
	}
	res, err := rn.Level(ctx, "db", []string{"m3", "m2"})
	if err != nil || res.Run.Kind != "sync" || res.Run.State != operator.RunDone {
		t.Fatalf("second level: %+v %v\n%s", res.Run, err, &fc.events)
	}
	if r, _, _ := rn.LastRun(ctx, "db", "sync"); r.Operator != "schedule@m1" {
		t.Fatalf("the Cluster's record names %q", r.Operator)
	}
	fc.HoldLease(leasehold.VolumeScope("db"), "ana@laptop", "volume move", time.Minute)
	_, err = rn.Level(ctx, "db", []string{"m2"})
	var held *leasehold.HeldError
	if !errors.As(err, &held) || held.Holder.Name != "ana@laptop" {
		t.Fatalf("level under ana's lease: %v", err)
	}
	if _, err := rn.Level(ctx, "db", []string{"m9"}); err == nil || !strings.Contains(err.Error(), "mirror: none of [m9] can take a Mirror of db") {
		t.Fatalf("no candidate: %v", err)
	}
}
