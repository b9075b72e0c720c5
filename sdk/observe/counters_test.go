package observe

import (
	"path/filepath"
	"reflect"
	"testing"
)

// TestCountersFixture: a counters file as ployzd writes it (with a field
// from a newer ployzd) reads into Counters, and writes back the same.
func TestCountersFixture(t *testing.T) {
	c, err := ReadCounters(filepath.Join("testdata", "counters.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Counters{StoreEventsDropped: map[string]map[string]int64{"ployzd": {"serving": 3}},
		JobRuns: []JobRuns{{Namespace: "shop", Service: "report", ByStatus: map[string]int64{"failed": 1, "succeeded": 4},
			LastStatus: "failed", LastSuccess: 1_700_000_000_500}},
		VolumeProtection: []VolumeProtection{{Volume: "db", Snapshots: map[string]int64{"pruned": 2, "taken": 3}, LastSnapshot: 1_700_000_000_000,
			Mirrors: []MirrorSync{{Machine: "m2", LastSync: 1_699_999_280_000}}}}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("read %+v, want %+v", c, want)
	}
	path := filepath.Join(t.TempDir(), "counters.json")
	if err := WriteCounters(path, c); err != nil {
		t.Fatal(err)
	}
	back, err := ReadCounters(path)
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip %+v (%v)", back, err)
	}
}
