package operator

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"
)

// TestVolumeRuns: one open run per Volume, gens rising per Volume, a run
// whose CLI died is marked lost, and the record round-trips.
func TestVolumeRuns(t *testing.T) {
	s, _ := open(t)
	t0 := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	live := map[int]bool{}
	defer func(f func(string, int) bool) { alive = f }(alive)
	alive = func(_ string, pid int) bool { return live[pid] }

	r1, err := s.BeginVolumeRun("lab", "db", "mirror", "m2", t0)
	if err != nil || r1.Gen != 1 || r1.State != RunOpen || r1.Pid != os.Getpid() {
		t.Fatalf("first run: %+v %v", r1, err)
	}
	live[r1.Pid] = true
	_, err = s.BeginVolumeRun("lab", "db", "sync", "", t0)
	var open *RunOpenError
	if !errors.As(err, &open) || !errors.Is(err, ErrRunOpen) || open.Run.Gen != 1 {
		t.Fatalf("second run while the first is open: %v", err)
	}
	// Another Volume, another context: their own gens.
	if r, err := s.BeginVolumeRun("lab", "logs", "mirror", "m2", t0); err != nil || r.Gen != 1 {
		t.Fatalf("logs: %+v %v", r, err)
	}
	if r, err := s.BeginVolumeRun("other", "db", "mirror", "m2", t0); err != nil || r.Gen != 1 {
		t.Fatalf("other context: %+v %v", r, err)
	}
	r1.Steps = append(r1.Steps, RunStep{Name: "send", Machine: "m2", Outcome: RunDone, Bytes: 10})
	r1.State = RunDone
	if err := s.SaveVolumeRun(r1); err != nil {
		t.Fatal(err)
	}
	r2, err := s.BeginVolumeRun("lab", "db", "sync", "", t0.Add(time.Minute))
	if err != nil || r2.Gen != 2 {
		t.Fatalf("after done: %+v %v", r2, err)
	}
	// r2's process is gone: the next run marks it lost.
	delete(live, r2.Pid)
	r3, err := s.BeginVolumeRun("lab", "db", "sync", "", t0.Add(2*time.Minute))
	if err != nil || r3.Gen != 3 {
		t.Fatalf("after a dead run: %+v %v", r3, err)
	}
	runs, err := s.VolumeRuns("lab", "db", 10)
	if err != nil || len(runs) != 3 {
		t.Fatalf("runs: %+v %v", runs, err)
	}
	if runs[0].Gen != 3 || runs[1].Gen != 2 || runs[1].State != RunLost || runs[2].State != RunDone || len(runs[2].Steps) != 1 {
		t.Fatalf("runs newest first: %+v", runs)
	}
	if all, _ := s.VolumeRuns("lab", "", 10); len(all) != 4 {
		t.Fatalf("all volumes: %d runs", len(all))
	}
}

// TestVolumeRunFixture reads a record this version wrote (with a field a
// later one adds) and writes it back with the same fields.
func TestVolumeRunFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/volume-run.json")
	if err != nil {
		t.Fatal(err)
	}
	var r VolumeRun
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	want := VolumeRun{Context: "lab", Volume: "db", Gen: 3, Kind: "mirror", Target: "m2", State: RunDone,
		Started: time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC), Updated: time.Date(2026, 12, 2, 15, 1, 0, 0, time.UTC), Host: "laptop", Pid: 4242,
		Steps: []RunStep{{Name: "check-writer", Machine: "m1", Outcome: RunDone}, {Name: "send", Machine: "m2", Outcome: RunDone, Detail: "full run-3", Bytes: 17000000, Seconds: 4.5}}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("decoded %+v\nwant    %+v", r, want)
	}
	out, _ := json.Marshal(r)
	var got, orig map[string]any
	_ = json.Unmarshal(out, &got)
	_ = json.Unmarshal(b, &orig)
	delete(orig, "a_later_field")
	if !reflect.DeepEqual(got, orig) {
		t.Fatalf("re-encoded %s", out)
	}
}

// TestVolumeRunMoveFixture pins a Move's record: its kind and downtime.
func TestVolumeRunMoveFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/volume-run-move.json")
	if err != nil {
		t.Fatal(err)
	}
	var r VolumeRun
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Kind != "move" || r.Gen != 4 || r.DowntimeSeconds != 3.25 || len(r.Steps) != 1 || r.Steps[0].Name != "promote" {
		t.Fatalf("decoded %+v", r)
	}
}

// TestLastVolumeRun: the newest run of a kind, none before the first,
// and an open run whose process is gone answered lost.
func TestLastVolumeRun(t *testing.T) {
	s, _ := open(t)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	live := map[int]bool{}
	defer func(f func(string, int) bool) { alive = f }(alive)
	alive = func(_ string, pid int) bool { return live[pid] }
	if _, ok, err := s.LastVolumeRun("lab", "db", "move"); ok || err != nil {
		t.Fatalf("no runs yet: %v %v", ok, err)
	}
	m1, _ := s.BeginVolumeRun("lab", "db", "move", "m2", t0)
	m1.State, m1.Source, m1.Stopped = RunFailed, "m1", []string{"shop-db-1"}
	if err := s.SaveVolumeRun(m1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginVolumeRun("lab", "db", "sync", "", t0); err != nil {
		t.Fatal(err)
	}
	r, ok, err := s.LastVolumeRun("lab", "db", "move")
	if !ok || err != nil || r.Gen != 1 || r.State != RunFailed || r.Source != "m1" || len(r.Stopped) != 1 {
		t.Fatalf("last move: %+v %v %v", r, ok, err)
	}
	if r, _, _ := s.LastVolumeRun("lab", "db", "sync"); r.Gen != 2 || r.State != RunLost {
		t.Fatalf("a dead open sync: %+v, want gen 2 lost", r)
	}
}

// TestBeginVolumeRunAbove: a run opens above the highest floor its
// Machines reported (runs from another operator computer), and the next
// one above that, whatever this store numbered before.
func TestBeginVolumeRunAbove(t *testing.T) {
	s, _ := open(t)
	t0 := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	defer func(f func(string, int) bool) { alive = f }(alive)
	alive = func(string, int) bool { return false }
	r, err := s.BeginVolumeRunAbove("lab", "db", "sync", "", 41, t0)
	if err != nil || r.Gen != 42 {
		t.Fatalf("above floor 41: %+v %v", r, err)
	}
	if r, err = s.BeginVolumeRunAbove("lab", "db", "sync", "", 7, t0); err != nil || r.Gen != 43 {
		t.Fatalf("a lower floor than this store's own gens: %+v %v, want gen 43", r, err)
	}
	if r, err = s.BeginVolumeRun("lab", "db", "sync", "", t0); err != nil || r.Gen != 44 {
		t.Fatalf("no floor: %+v %v, want gen 44", r, err)
	}
}
