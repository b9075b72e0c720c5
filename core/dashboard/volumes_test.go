package dashboard

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/volumerun"
)

// The Volumes view judges each Machine as `ployz volume ls` does: a pool,
// no pool (with the command that gives it one) or no answer.
func TestVolumesView(t *testing.T) {
	_, ts := serve(t, newFake(), time.Second)
	var v Volumes
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/volumes", &v); code != 200 || len(v.Machines) != 3 {
		t.Fatalf("volumes %d %+v", code, v)
	}
	m1, m2, m3 := v.Machines[0], v.Machines[1], v.Machines[2]
	if m1.State != "pool" || m1.Note != "" || m1.List.Pool != "tank" || len(m1.List.Volumes) != 3 || m1.List.Volumes[1].Snapshots[1].Name != "s2" {
		t.Errorf("m1 %+v", m1)
	}
	if m2.State != "no_pool" || !strings.Contains(m2.Note, "no ZFS pool") || !strings.Contains(m2.Note, "ployz machine update m2 --zfs-pool NAME") {
		t.Errorf("m2 %+v", m2)
	}
	if m3.State != "no_answer" || m3.Note != "no answer: connection refused" {
		t.Errorf("m3 %+v", m3)
	}
	if len(v.Mounts) != 1 || v.Mounts[0] != dbMount {
		t.Errorf("mounts %+v", v.Mounts)
	}
}

func TestVolumeDetailView(t *testing.T) {
	_, ts := serve(t, newFake(), time.Second)
	var d VolumeDetail
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/volume?machine=m1&name=db", &d); code != 200 {
		t.Fatalf("db %d %+v", code, d)
	}
	if d.Machine != "m1" || d.Pool != "tank" || d.Volume.Dataset != "tank/ployz/volumes/db" || len(d.Volume.Snapshots) != 2 {
		t.Errorf("db %+v", d)
	}
	if len(d.Mounts) != 1 || d.Mounts[0].Container != "web-0" {
		t.Errorf("db mounts %+v", d.Mounts)
	}
	// s1's GUID is db-restore's s1 too: the same point in time; s2 has no copy.
	if c := d.Copies["s1"]; len(c) != 1 || c[0] != (SnapshotCopy{Machine: "m1", Volume: "db-restore", Snapshot: "s1"}) || len(d.Copies) != 1 {
		t.Errorf("copies %+v", d.Copies)
	}
	if len(d.Unanswered) != 1 || d.Unanswered[0] != "m3" {
		t.Errorf("unanswered %v", d.Unanswered)
	}
	// The Machine's id picks it as well as its name; an unmounted volume
	// has no mounts (an empty list, not a missing one).
	var c map[string]any
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/volume?machine=m1-id&name=cache", &c); code != 200 || c["machine"] != "m1" || c["mounts"] == nil {
		t.Errorf("cache by Machine id: %d %v", code, c)
	}

	for url, want := range map[string]struct{ field, msg string }{
		"/api/view/volume?name=db":              {"machine", "required"},
		"/api/view/volume?machine=m1":           {"name", "required"},
		"/api/view/volume?machine=m9&name=db":   {"machine", `no Machine "m9"`},
		"/api/view/volume?machine=m1&name=nope": {"name", `no volume "nope" on m1`},
		"/api/view/volume?machine=m2&name=db":   {"name", `no volume "db" on m2: it has no ZFS pool; it is on m1`},
	} {
		var fe FieldError
		if code := getJSON(t, ts.Client(), ts.URL+url, &fe); code != 400 || fe.Field != want.field || !strings.Contains(fe.Msg, want.msg) {
			t.Errorf("GET %s: %d %+v, want 400 naming %s: %s", url, code, fe, want.field, want.msg)
		}
	}
	var e map[string]string
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/volume?machine=m3&name=db", &e); code != 502 || !strings.Contains(e["error"], "m3 did not answer: connection refused") {
		t.Errorf("a volume on a Machine that did not answer: %d %v", code, e)
	}
}

// The Volumes page updates live: a new snapshot is sent without a reload.
func TestVolumesEvents(t *testing.T) {
	src := newFake()
	_, ts := serve(t, src, 20*time.Millisecond)
	rd := openEvents(t, ts.Client(), ts.URL+"/api/events?view=volume&machine=m1&name=db")
	if ev, data := readEvent(t, rd); ev != "view" || !strings.Contains(data, `"name":"s2"`) || strings.Contains(data, `"name":"s3"`) {
		t.Fatalf("first event %s %s", ev, data)
	}
	src.mu.Lock()
	src.snaps = 3
	src.mu.Unlock()
	if ev, data := readEvent(t, rd); ev != "view" || !strings.Contains(data, `"name":"s3"`) {
		t.Fatalf("second event %s %s", ev, data)
	}
}

// The Volumes view says each volume's protection in `ployz volume
// inspect`'s words and highlights a Mirror more than twice its interval
// behind or a scheduled run that failed, never one still going.
func TestVolumeProtectionView(t *testing.T) {
	src := newFake()
	_, ts := serve(t, src, time.Second)
	protection := func() VolumeProtection {
		t.Helper()
		var v Volumes
		if code := getJSON(t, ts.Client(), ts.URL+"/api/view/volumes", &v); code != 200 {
			t.Fatalf("volumes %d %+v", code, v)
		}
		var d VolumeDetail
		if code := getJSON(t, ts.Client(), ts.URL+"/api/view/volume?machine=m1&name=db", &d); code != 200 || d.Protection == nil {
			t.Fatalf("db %d %+v", code, d)
		}
		if p := v.Machines[0].Protection["db"]; !reflect.DeepEqual(p, *d.Protection) {
			t.Errorf("the list says %+v, the volume's page %+v", p, *d.Protection)
		}
		if _, ok := v.Machines[0].Protection["cache"]; ok {
			t.Errorf("cache has protection: %+v", v.Machines[0].Protection)
		}
		return *d.Protection
	}
	set := func(p VolumeProtection) {
		src.mu.Lock()
		src.prot["db"] = p
		src.mu.Unlock()
	}

	p := protection()
	if p.Snapshots != "1 automatic snapshot(s), newest 2026-12-07T05:00:00Z" || p.Alert || p.FailedRun != "" {
		t.Errorf("db within its interval %+v", p)
	}
	if len(p.Lines) != 1 || p.Lines[0] != (MirrorLine{Machine: "m2", Text: "Mirror on m2 is 12 min behind (sync run gen 7, 2026-12-07T05:18:00Z)"}) {
		t.Errorf("db's Mirror lines %+v", p.Lines)
	}

	// Twice every (30 min) is still in time; past it, overdue.
	set(dbProtection(30*time.Minute, nil))
	if p := protection(); p.Alert || p.Lines[0].Overdue {
		t.Errorf("30 min behind, every 15m: %+v", p)
	}
	set(dbProtection(31*time.Minute, nil))
	if p := protection(); !p.Alert || !p.Lines[0].Overdue || p.Lines[0].Text != "Mirror on m2 is 31 min behind (sync run gen 7, 2026-12-07T04:59:00Z)" {
		t.Errorf("31 min behind, every 15m: %+v", p)
	}
	// No interval known (no Saved State declares it): never overdue.
	undeclared := dbProtection(5*time.Hour, nil)
	undeclared.MirrorEvery = ""
	set(undeclared)
	if p := protection(); p.Alert || p.Lines[0].Overdue {
		t.Errorf("no interval declared: %+v", p)
	}

	started := time.Date(2026, 12, 7, 5, 28, 0, 0, time.UTC)
	failed := &volumerun.ScheduledRun{Gen: 8, Kind: "sync", State: operator.RunFailed, Error: "send db from m1 to m2: connection reset", Started: started, Operator: "schedule@m1"}
	set(dbProtection(12*time.Minute, failed))
	if p := protection(); !p.Alert || p.Lines[0].Overdue || p.FailedRun != "scheduled sync run gen 8 failed (2026-12-07T05:28:00Z, schedule@m1): send db from m1 to m2: connection reset" {
		t.Errorf("a failed scheduled run: %+v", p)
	}
	for _, state := range []string{operator.RunOpen, operator.RunDone} {
		r := *failed
		r.State, r.Error = state, ""
		set(dbProtection(12*time.Minute, &r))
		if p := protection(); p.Alert || p.FailedRun != "" {
			t.Errorf("a scheduled run %s: %+v", state, p)
		}
	}
}
