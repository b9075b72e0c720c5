package observe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSpecDefaultsAndFields(t *testing.T) {
	s, err := ParseSpec(nil)
	if err != nil || s.DockerRoot != DefaultDockerRoot || s.StateDir != DefaultStateDir ||
		s.Budget.MaxBytes != DefaultMaxBytes || s.Budget.MaxAge() != DefaultMaxAge || s.Budget.MinFreeBytes != DefaultMinFreeBytes {
		t.Fatalf("default spec = %+v, %v", s, err)
	}
	// A newer ployzd's field is ignored; a known one is kept.
	s, err = ParseSpec([]byte(`{"machine_id":"m1","budget":{"max_bytes":100},"new_field":1}`))
	if err != nil || s.MachineID != "m1" || s.Budget.MaxBytes != 100 {
		t.Fatalf("spec = %+v, %v", s, err)
	}
	for in, field := range map[string]string{
		`{"state_dir":"rel"}`:               "state_dir",
		`{"docker_root":"x"}`:               "docker_root",
		`{"budget":{"max_bytes":-1}}`:       "budget.max_bytes",
		`{"budget":{"max_age_seconds":-1}}`: "budget.max_age_seconds",
		`{"budget":{"min_free_bytes":-1}}`:  "budget.min_free_bytes",
		`{"counters_file":"counters.json"}`: "counters_file",
	} {
		if _, err := ParseSpec([]byte(in)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v does not name %s", in, err, field)
		}
	}
}

func TestSpecWatchSeesOnlyARealChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	running, _ := ParseSpec(nil)
	w := WatchSpec(path, running)
	if w.Changed() {
		t.Fatal("no file is no change")
	}
	os.WriteFile(path, []byte(`{}`), 0o644) // the defaults: the running spec
	if w.Changed() {
		t.Fatal("the same spec in a new file is no change")
	}
	os.WriteFile(path, []byte(`{"metrics_listen":"127.0.0.1:9101"}`), 0o644)
	if !w.Changed() {
		t.Fatal("a new listen address is a change")
	}
}

func TestParseBudget(t *testing.T) {
	for in, want := range map[string]int64{"8MiB": 8 << 20, "8m": 8 << 20, "2GiB": 2 << 30, "512MB": 512 << 20, "1048576": 1 << 20, " 16MiB ": 16 << 20} {
		if got, err := ParseBudget(in); err != nil || got != want {
			t.Errorf("ParseBudget(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-5MiB", "1000", "512KiB"} {
		if _, err := ParseBudget(in); err == nil {
			t.Errorf("ParseBudget(%q) accepted", in)
		}
	}
	if b := BudgetFromLabels(map[string]string{BudgetLabel: "8MiB"}); b.MaxBytes != 8<<20 {
		t.Errorf("BudgetFromLabels: %+v", b)
	}
	if b := BudgetFromLabels(map[string]string{BudgetLabel: "x"}); b.MaxBytes != 0 {
		t.Errorf("a bad label gave %+v, want the default", b)
	}
}

// TestCountersRoundTrip: what ployzd writes the metrics plugin reads; no
// file yet is no counts, a broken one an error naming it.
func TestCountersRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "counters.json")
	if c, err := ReadCounters(path); err != nil || c.StoreEventsDropped != nil {
		t.Fatalf("no file: %+v, %v", c, err)
	}
	want := Counters{StoreEventsDropped: map[string]map[string]int64{DaemonProcess: {"serving": 2}, "dns": {"containers": 1}}}
	if err := WriteCounters(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCounters(path)
	if err != nil || got.StoreEventsDropped["ployzd"]["serving"] != 2 || got.StoreEventsDropped["dns"]["containers"] != 1 {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCounters(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("broken file: %v, want an error naming it", err)
	}
}
