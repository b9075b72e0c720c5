package volumerun

import (
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// TestProtectionOf: the automatic snapshots are counted and the newest
// dated; each Mirror's lag runs from the newest run whose send landed
// there (a failed send does not count, a skipped one does), a deleted
// Mirror is not reported, and a Move's source is a Mirror at the cut.
func TestProtectionOf(t *testing.T) {
	now := time.Date(2026, 12, 7, 5, 30, 0, 0, time.UTC)
	v := rpc.Volume{Name: "db", Snapshots: []rpc.VolumeSnapshot{
		{Name: "auto-20261207-0400", Created: now.Add(-90 * time.Minute).UnixNano()},
		{Name: "auto-20261207-0500", Created: now.Add(-30 * time.Minute).UnixNano()},
		{Name: "run-7", Created: now.Add(-12 * time.Minute).UnixNano()},
		{Name: "before-upgrade", Created: now.UnixNano()},
	}}
	step := func(m, outcome string) operator.RunStep {
		return operator.RunStep{Name: "send", Machine: m, Outcome: outcome}
	}
	runs := []operator.VolumeRun{ // newest first
		{Gen: 9, Kind: "sync", State: operator.RunFailed, Started: now.Add(-2 * time.Minute), Steps: []operator.RunStep{step("m2", operator.RunFailed), step("m3", operator.RunDone)}},
		{Gen: 8, Kind: "delete-mirror", State: operator.RunDone, Target: "m4", Started: now.Add(-5 * time.Minute)},
		{Gen: 7, Kind: "sync", State: operator.RunDone, Started: now.Add(-12 * time.Minute), Steps: []operator.RunStep{step("m2", operator.StepSkipped), step("m4", operator.RunDone)}},
		{Gen: 6, Kind: "move", State: operator.RunDone, Source: "m5", Target: "m1", Started: now.Add(-3 * time.Hour), Steps: []operator.RunStep{step("m1", operator.RunDone)}},
		{Gen: 5, Kind: "mirror", State: operator.RunDone, Started: now.Add(-4 * time.Hour), Steps: []operator.RunStep{step("m2", operator.RunDone)}},
	}
	p := ProtectionOf("m1", v, runs, now)
	if p.SnapshotsKept != 2 || p.LastSnapshot == nil || !p.LastSnapshot.Equal(now.Add(-30*time.Minute)) {
		t.Fatalf("snapshots: %d, last %v", p.SnapshotsKept, p.LastSnapshot)
	}
	want := []string{
		"Mirror on m3 is 2 min behind (sync run gen 9, 2026-12-07T05:28:00Z)",
		"Mirror on m2 is 12 min behind (sync run gen 7, 2026-12-07T05:18:00Z)",
		"Mirror on m5 is 3 h behind (move run gen 6, 2026-12-07T02:30:00Z)",
	}
	if len(p.Mirrors) != len(want) {
		t.Fatalf("mirrors %+v", p.Mirrors)
	}
	for i, w := range want {
		if got := p.Mirrors[i].String(); got != w {
			t.Errorf("mirror %d: %q, want %q", i, got, w)
		}
	}
}
