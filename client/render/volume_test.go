package render

import (
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumerun"
	"github.com/ployz/ployz/core/volumes"
)

// TestPrintEvent: each kind of event is the line it always was.
func TestPrintEvent(t *testing.T) {
	var b strings.Builder
	p := VolumeEvent(&b)
	p(volumerun.Event{Kind: volumerun.EventBegin, Text: "volume db: sync run gen 3"})
	p(volumerun.Event{Kind: volumerun.EventStep, Step: "send", Machine: "m2", Text: "done: full run-3: 100B direct"})
	p(volumerun.Event{Kind: volumerun.EventProgress, Step: "stop", Machine: "m1", Text: "m1: docker stop web-ab12 (busy, 12s)"})
	p(volumerun.Event{Kind: volumerun.EventNote, Machine: "m1", Text: "undone: m1 is the Writer of db again and its Containers run"})
	p(volumerun.Event{Kind: volumerun.EventWarning, Text: "volume run record not saved: disk full"})
	want := "volume db: sync run gen 3\n" +
		"  send           m2       done: full run-3: 100B direct\n" +
		"    m1: docker stop web-ab12 (busy, 12s)\n" +
		"  undone: m1 is the Writer of db again and its Containers run\n" +
		"warning: volume run record not saved: disk full\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// VolumeList prints every Machine's volumes, then a note per Machine
// that has no pool or did not answer (volumes.MachineVolumes.Note).
func TestVolumeList(t *testing.T) {
	ms := []volumes.MachineVolumes{
		{Machine: "m1", List: &rpc.VolumeList{Pool: "ployz", Volumes: []rpc.Volume{{Name: "db", SizeBytes: 1 << 30, UsedBytes: 1 << 20, Mountpoint: "/var/lib/ployz/volumes/db",
			Snapshots: []rpc.VolumeSnapshot{{Name: "s1"}}, Copy: &rpc.VolumeCopy{Role: "writer"}}}}},
		{Machine: "m2", List: &rpc.VolumeList{}},
		{Machine: "m3", Error: "down"},
	}
	var b strings.Builder
	VolumeList(&b, ms)
	for _, want := range []string{"m1       db    writer  1GiB  1MiB  1          /var/lib/ployz/volumes/db",
		"m2: no ZFS pool, no Provisioned Volumes (`ployz machine update m2 --zfs-pool NAME`)", "m3: no answer: down"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("list lacks %q:\n%s", want, b.String())
		}
	}
}

// TestVolume: a volume's description has its size, copy (epoch and
// floor), resume token, snapshots and bookmarks; none is "none".
func TestVolume(t *testing.T) {
	var b strings.Builder
	Volume(&b, "m1", rpc.Volume{Name: "db", Dataset: "tank/db", SizeBytes: 1 << 30, ReadOnly: true, Copy: &rpc.VolumeCopy{Role: "mirror", Epoch: 2, Floor: 3},
		ResumeToken: "tok", Snapshots: []rpc.VolumeSnapshot{{Name: "run-3", GUID: "g3"}}, Bookmarks: []rpc.VolumeBookmark{{Name: "run-2", GUID: "g2"}}})
	contains(t, "volume", b.String(), "Volume db on m1", "size: 1GiB", "readonly: on", "copy: mirror (writer epoch 2), run floor gen 3",
		"resume token: tok", "run-3 1970-01-01T00:00:00Z used 0B guid g3", "bookmarks:", "run-2 1970-01-01T00:00:00Z guid g2")
	b.Reset()
	Volume(&b, "m2", rpc.Volume{Name: "tmp"})
	contains(t, "bare volume", b.String(), "size: none", "readonly: off", "snapshots: none")
	b.Reset()
	if err := VolumeRuns(&b, []operator.VolumeRun{{Volume: "db", Gen: 3, Kind: "move", Target: "m2", State: operator.RunDone, Operator: "ana@laptop"}}); err != nil {
		t.Fatal(err)
	}
	contains(t, "runs", b.String(), "VOLUME GEN KIND TARGET STATE STARTED STEPS OPERATOR", "db 3 move m2 done", "ana@laptop")
	b.Reset()
	last := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	Protection(&b, volumerun.Protection{LastSnapshot: &last, SnapshotsKept: 26,
		Mirrors: []volumerun.MirrorLag{{Machine: "m2", Gen: 7, Kind: "sync", Synced: last, BehindSeconds: 720}}})
	contains(t, "protection", b.String(), "scheduled: 26 automatic snapshot(s), newest 2026-12-07T05:00:00Z",
		"Mirror on m2 is 12 min behind (sync run gen 7, 2026-12-07T05:00:00Z)")
	if strings.Contains(b.String(), "scheduled sync") {
		t.Fatalf("no scheduled run on record, yet:\n%s", b.String())
	}
	b.Reset()
	Protection(&b, volumerun.Protection{Scheduled: &volumerun.ScheduledRun{Gen: 8, Kind: "sync", State: operator.RunFailed, Error: "send: reset", Started: last, Operator: "schedule@m1"}})
	contains(t, "failed scheduled run", b.String(), "scheduled sync run gen 8 failed (2026-12-07T05:00:00Z, schedule@m1): send: reset")
	b.Reset()
	Protection(&b, volumerun.Protection{Scheduled: &volumerun.ScheduledRun{Gen: 9, Kind: "sync", State: operator.RunDone, Started: last, Operator: "schedule@m1"}})
	if b.Len() != 0 {
		t.Fatalf("a scheduled run that ended well is the lag's, not a line of its own:\n%s", b.String())
	}
}

// TestVolumeSnapshots: each snapshot's fate under the retention reads
// plainly: kept by which rules, pruned next, never pruned.
func TestVolumeSnapshots(t *testing.T) {
	var b strings.Builder
	VolumeSnapshots(&b, "m1", rpc.VolumeSnapshots{Volume: "db", Copy: &rpc.VolumeCopy{Role: "writer"}, Retention: &volprotect.Retention{Hourly: 24, Daily: 7},
		Snapshots: []rpc.VolumeSnapshotInfo{
			{Name: "before-upgrade", Created: 1764680000000000000, UsedBytes: 4096},
			{Name: "auto-20261207-0900", Auto: true},
			{Name: "auto-20261207-1000", Auto: true, Kept: true, Rules: []string{"newest", "hourly"}},
		}})
	for _, want := range []string{"Volume db on m1 (writer); retention: hourly 24, daily 7", "SNAPSHOT", "before-upgrade", "4KiB", "not automatic: never pruned",
		"pruned at the next round", "kept (newest, hourly)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}
