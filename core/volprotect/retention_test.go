package volprotect

import (
	"slices"
	"testing"
	"time"
)

// every is an automatic snapshot each step from start (inclusive) to end
// (exclusive), with Created from its name.
func every(start, end time.Time, step time.Duration) []Snapshot {
	var out []Snapshot
	for t := start; t.Before(end); t = t.Add(step) {
		out = append(out, Snapshot{Name: SnapshotName(t)})
	}
	return out
}

func names(ks []Kept) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Name)
	}
	return out
}

func TestKeep(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			panic(err)
		}
		return v
	}
	now := at("2026-12-07 05:10") // a Monday
	for _, c := range []struct {
		name  string
		snaps []Snapshot
		r     Retention
		keep  []string
		prune int
	}{
		{name: "hourly 3 of 5 hours", snaps: every(at("2026-12-07 00:00"), at("2026-12-07 05:00"), time.Hour), r: Retention{Hourly: 3},
			keep: []string{"auto-20261207-0400", "auto-20261207-0300", "auto-20261207-0200"}, prune: 2},
		{name: "two in one hour count once", snaps: []Snapshot{{Name: "auto-20261207-0400"}, {Name: "auto-20261207-0430"}, {Name: "auto-20261207-0300"}},
			r: Retention{Hourly: 2}, keep: []string{"auto-20261207-0430", "auto-20261207-0300"}, prune: 1},
		{name: "hourly 2 daily 3 over 4 days", snaps: every(at("2026-12-03 00:00"), at("2026-12-07 05:00"), time.Hour), r: Retention{Hourly: 2, Daily: 3},
			// the newest two hours; the day buckets' newest are 07 04:00 (already kept), 06 23:00, 05 23:00
			keep: []string{"auto-20261207-0400", "auto-20261207-0300", "auto-20261206-2300", "auto-20261205-2300"}, prune: 101 - 4},
		{name: "weekly", snaps: every(at("2026-11-09 12:00"), at("2026-12-07 05:00"), 24*time.Hour), r: Retention{Weekly: 2},
			// weeks start Monday: 30 Nov - 6 Dec's newest is 6 Dec; 23-29 Nov's is 29 Nov; the newest (7 Dec? no: 6 Dec 12:00) leads
			keep: []string{"auto-20261206-1200", "auto-20261129-1200"}, prune: 28 - 2},
		{name: "a week down keeps what it has", snaps: every(at("2026-11-20 00:00"), at("2026-11-20 06:00"), time.Hour), r: Retention{Hourly: 24},
			keep: []string{"auto-20261120-0500", "auto-20261120-0400", "auto-20261120-0300", "auto-20261120-0200", "auto-20261120-0100", "auto-20261120-0000"}},
		{name: "other snapshots are never planned", snaps: []Snapshot{{Name: "run-7"}, {Name: "before-upgrade"}, {Name: "auto-x"}, {Name: "auto-20261207-0400"}, {Name: "auto-20261207-0300"}},
			r: Retention{Hourly: 1}, keep: []string{"auto-20261207-0400"}, prune: 1},
		{name: "zero retention keeps the newest", snaps: every(at("2026-12-07 00:00"), at("2026-12-07 03:00"), time.Hour), r: Retention{},
			keep: []string{"auto-20261207-0200"}, prune: 2},
		{name: "after now is kept", snaps: []Snapshot{{Name: "auto-20261208-0000"}, {Name: "auto-20261207-0500"}, {Name: "auto-20261207-0400"}},
			r: Retention{Hourly: 1}, keep: []string{"auto-20261208-0000", "auto-20261207-0500"}, prune: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Keep(c.snaps, c.r, now)
			if got := names(p.Keep); !slices.Equal(got, c.keep) {
				t.Errorf("keep %v, want %v", got, c.keep)
			}
			if len(p.Prune) != c.prune {
				t.Errorf("pruned %d (%v), want %d", len(p.Prune), p.Prune, c.prune)
			}
		})
	}
}

func TestSnapshotDue(t *testing.T) {
	now := time.Date(2026, 12, 7, 5, 10, 0, 0, time.UTC)
	for _, c := range []struct {
		r      Retention
		newest time.Time
		due    bool
		next   time.Time
	}{
		{Retention{Hourly: 1}, time.Time{}, true, time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)},
		{Retention{Hourly: 1}, now.Add(-5 * time.Minute), false, time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)},
		{Retention{Hourly: 1}, now.Add(-15 * time.Minute), true, time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)},
		{Retention{Daily: 7}, now.Add(-4 * time.Hour), false, time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)},
		{Retention{Daily: 7}, now.Add(-6 * time.Hour), true, time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)},
		{Retention{Weekly: 2}, now.Add(-6 * time.Hour), true, time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)},
		{Retention{Hourly: 1}, now.Add(time.Hour), true, time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)},
		{Retention{}, time.Time{}, false, time.Time{}},
	} {
		due, next := SnapshotDue(c.r, c.newest, now)
		if due != c.due || !next.Equal(c.next) {
			t.Errorf("SnapshotDue(%+v, %v) = %v, %v; want %v, %v", c.r, c.newest, due, next, c.due, c.next)
		}
	}
}
