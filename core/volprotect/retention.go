package volprotect

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Automatic snapshots are named auto-YYYYMMDD-HHMM (UTC, the minute the
// Protector took it): only names with this prefix are ever pruned, so an
// operator's own snapshots and the runs' run-<gen> are never touched.
const (
	Prefix     = "auto-"
	nameLayout = "20060102-1504"
)

// SnapshotName is the automatic snapshot's name for t.
func SnapshotName(t time.Time) string { return Prefix + t.UTC().Format(nameLayout) }

// IsAuto reports whether name is an automatic snapshot.
func IsAuto(name string) bool {
	_, ok := autoTime(name)
	return ok
}

func autoTime(name string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(nameLayout, rest)
	return t, err == nil
}

// Snapshot is one snapshot of a volume as the planner reads it.
type Snapshot struct {
	Name    string
	Created time.Time
}

// Plan is what Keep decided: the automatic snapshots kept (newest first,
// with the buckets that keep each) and those to destroy.
type Plan struct {
	Keep  []Kept
	Prune []string
}

// Kept is a kept snapshot and why ("hourly", "daily", "newest").
type Kept struct {
	Name    string
	Created time.Time
	Why     []string
}

// Keep plans the retention of snaps' automatic snapshots under r: walking
// newest first, a snapshot is kept when it is the newest of an hour (day,
// ISO week; UTC) not yet counted and fewer than r.Hourly (Daily, Weekly)
// such buckets were. Buckets count those holding a snapshot, not the
// clock's, so a Machine that was down for a week keeps what it has
// rather than pruning it all. The newest automatic snapshot is always
// kept, and so is one from after now (a clock that went backwards):
// never destroy what the planner cannot place.
func Keep(snaps []Snapshot, r Retention, now time.Time) Plan {
	var autos []Snapshot
	for _, s := range snaps {
		if t, ok := autoTime(s.Name); ok {
			if s.Created.IsZero() {
				s.Created = t
			}
			autos = append(autos, s)
		}
	}
	slices.SortStableFunc(autos, func(a, b Snapshot) int { return b.Created.Compare(a.Created) })
	buckets := []struct {
		why  string
		n    int
		key  func(time.Time) string
		last string
		used int
	}{
		{why: "hourly", n: r.Hourly, key: func(t time.Time) string { return t.UTC().Format("2006010215") }},
		{why: "daily", n: r.Daily, key: func(t time.Time) string { return t.UTC().Format("20060102") }},
		{why: "weekly", n: r.Weekly, key: func(t time.Time) string {
			y, w := t.UTC().ISOWeek()
			return fmt.Sprintf("%d-%02d", y, w)
		}},
	}
	var p Plan
	first := true
	for _, s := range autos {
		// One from after now is kept and counts in no bucket.
		if s.Created.After(now) {
			p.Keep = append(p.Keep, Kept{Name: s.Name, Created: s.Created, Why: []string{"after now"}})
			continue
		}
		var why []string
		if first {
			why, first = append(why, "newest"), false
		}
		for j := range buckets {
			b := &buckets[j]
			k := b.key(s.Created)
			if b.used < b.n && k != b.last {
				b.last, b.used = k, b.used+1
				why = append(why, b.why)
			}
		}
		if len(why) == 0 {
			p.Prune = append(p.Prune, s.Name)
			continue
		}
		p.Keep = append(p.Keep, Kept{Name: s.Name, Created: s.Created, Why: why})
	}
	return p
}

// Period is how often r wants a snapshot: hourly when it keeps hourly
// ones, else daily, else weekly (0: none).
func (r Retention) Period() time.Duration {
	switch {
	case r.Hourly > 0:
		return time.Hour
	case r.Daily > 0:
		return 24 * time.Hour
	case r.Weekly > 0:
		return 7 * 24 * time.Hour
	}
	return 0
}

// SnapshotDue reports whether r wants a snapshot at now given the newest
// automatic one (zero: none): when now is in a later period bucket (the
// hour, day or week, UTC, from the Unix epoch's Monday for weeks) than
// the newest, or the newest is from after now. Next is when the next
// bucket starts.
func SnapshotDue(r Retention, newest, now time.Time) (due bool, next time.Time) {
	p := r.Period()
	if p == 0 {
		return false, time.Time{}
	}
	start := bucketStart(now, p)
	next = start.Add(p)
	if newest.IsZero() || newest.Before(start) || newest.After(now) {
		return true, next
	}
	return false, next
}

// bucketStart is the start of now's bucket of length p (UTC); weeks
// start on Monday (1970-01-05 was one).
func bucketStart(now time.Time, p time.Duration) time.Time {
	monday := time.Date(1970, 1, 5, 0, 0, 0, 0, time.UTC)
	since := now.UTC().Sub(monday)
	return monday.Add(since - since%p)
}
