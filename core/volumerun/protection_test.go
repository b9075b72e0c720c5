package volumerun

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
)

// TestProtectionOf: the automatic snapshots are counted and the newest
// dated; each Mirror's lag runs from its last sync (volprotect.Lags) to
// now, as `inspect` prints it.
func TestProtectionOf(t *testing.T) {
	now := time.Date(2026, 12, 7, 5, 30, 0, 0, time.UTC)
	v := rpc.Volume{Name: "db", Snapshots: []rpc.VolumeSnapshot{
		{Name: "auto-20261207-0400", Created: now.Add(-90 * time.Minute).UnixNano()},
		{Name: "auto-20261207-0500", Created: now.Add(-30 * time.Minute).UnixNano()},
		{Name: "run-7", Created: now.Add(-12 * time.Minute).UnixNano()},
		{Name: "before-upgrade", Created: now.UnixNano()},
	}}
	runs := []operator.VolumeRun{{Gen: 7, Kind: "sync", State: operator.RunDone, Started: now.Add(-12 * time.Minute),
		Steps: []operator.RunStep{{Name: "send", Machine: "m2", Outcome: operator.RunDone}}}}
	p := ProtectionOf("m1", v, runs, now)
	if p.SnapshotsKept != 2 || p.LastSnapshot == nil || !p.LastSnapshot.Equal(now.Add(-30*time.Minute)) {
		t.Fatalf("snapshots: %d, last %v", p.SnapshotsKept, p.LastSnapshot)
	}
	if len(p.Mirrors) != 1 || p.Mirrors[0].String() != "Mirror on m2 is 12 min behind (sync run gen 7, 2026-12-07T05:18:00Z)" {
		t.Fatalf("mirrors %+v", p.Mirrors)
	}
	if p.Scheduled != nil {
		t.Fatalf("an operator's run reported as scheduled: %+v", p.Scheduled)
	}
	// A scheduled run that failed is reported with its error; the
	// Mirror's lag still runs from the last run that landed.
	failed := operator.VolumeRun{Gen: 8, Kind: "sync", State: operator.RunFailed, Error: "send db from m1 to m2: connection reset",
		Started: now.Add(-2 * time.Minute), Operator: volprotect.ScheduleOperator("m1"),
		Steps: []operator.RunStep{{Name: "send", Machine: "m2", Outcome: operator.RunFailed}}}
	p = ProtectionOf("m1", v, append([]operator.VolumeRun{failed}, runs...), now)
	want := "scheduled sync run gen 8 failed (2026-12-07T05:28:00Z, schedule@m1): send db from m1 to m2: connection reset"
	if p.Scheduled == nil || p.Scheduled.String() != want || p.Mirrors[0].Gen != 7 {
		t.Fatalf("scheduled %+v, mirrors %+v; want %q", p.Scheduled, p.Mirrors, want)
	}
}

// TestLagReadsRunRecords: volprotect.Run decodes the fields the lag
// needs from a run record's JSON as the volume_runs table keeps it (the
// daemon reads them without linking the operator store).
func TestLagReadsRunRecords(t *testing.T) {
	r := operator.VolumeRun{Volume: "db", Gen: 4, Kind: "move", State: operator.RunDone, Target: "m1", Source: "m5",
		Started: time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC), Steps: []operator.RunStep{{Name: "send", Machine: "m1", Outcome: operator.RunDone, Bytes: 9}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got volprotect.Run
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := volprotect.Run{Gen: 4, Kind: "move", State: "done", Target: "m1", Source: "m5", Started: r.Started, Steps: []volprotect.Step{{Name: "send", Machine: "m1", Outcome: "done"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

// TestProtectionLines: the strings inspect and the dashboard share, and
// when a Mirror is overdue (more than twice its every behind).
func TestProtectionLines(t *testing.T) {
	if l := (Protection{}).SnapshotsLine(); l != "" {
		t.Errorf("no automatic snapshot: %q", l)
	}
	last := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	if l := (Protection{LastSnapshot: &last, SnapshotsKept: 26}).SnapshotsLine(); l != "26 automatic snapshot(s), newest 2026-12-07T05:00:00Z" {
		t.Errorf("snapshots line %q", l)
	}
	for state, notDone := range map[string]bool{operator.RunDone: false, operator.RunOpen: true, operator.RunFailed: true, operator.RunLost: true} {
		p := Protection{Scheduled: &ScheduledRun{Gen: 3, State: state}}
		if got := p.NotDone() != nil; got != notDone {
			t.Errorf("scheduled run %s: not done %v, want %v", state, got, notDone)
		}
	}
	l := MirrorLag{BehindSeconds: 30 * 60}
	if l.Overdue(15*time.Minute) || !(MirrorLag{BehindSeconds: 30*60 + 1}).Overdue(15*time.Minute) || l.Overdue(0) {
		t.Errorf("overdue is more than twice every behind, never without an every")
	}
}
