package volume

import (
	"slices"
	"strings"
	"testing"
)

func TestValidPool(t *testing.T) {
	for _, ok := range []string{"ployz", "tank", "data-1", "t.a_n:k"} {
		if err := ValidPool(ok); err != nil {
			t.Errorf("ValidPool(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "1tank", "tank/ployz", "mirror0", "raidz", "log", "ta nk", strings.Repeat("a", 256)} {
		if err := ValidPool(bad); err == nil {
			t.Errorf("ValidPool(%q) accepted", bad)
		}
	}
}

func TestValidNames(t *testing.T) {
	for _, ok := range []string{"db", "pg-data", "a.b_c", "0x"} {
		if err := ValidName(ok); err != nil {
			t.Errorf("ValidName(%q) = %v", ok, err)
		}
		if err := ValidSnapshot(ok); err != nil {
			t.Errorf("ValidSnapshot(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "DB", "-x", "a/b", "a@b", "a b", strings.Repeat("a", 64)} {
		if err := ValidName(bad); err == nil {
			t.Errorf("ValidName(%q) accepted", bad)
		}
		if err := ValidSnapshot(bad); err == nil {
			t.Errorf("ValidSnapshot(%q) accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"1GiB": 1 << 30, "1G": 1 << 30, "512MiB": 512 << 20, " 1MiB ": 1 << 20, "2097152": 2 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "big", "1KiB", "-1GiB", "0"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec([]byte(`{"machine_id":"m1","pool":"ployz","future":1}`))
	if err != nil || s.Pool != "ployz" || s.MachineID != "m1" {
		t.Fatalf("ParseSpec = %+v, %v", s, err)
	}
	for _, empty := range []string{"", "null", " "} {
		if s, err := ParseSpec([]byte(empty)); err != nil || s.Pool != "" {
			t.Errorf("ParseSpec(%q) = %+v, %v", empty, s, err)
		}
	}
	if _, err := ParseSpec([]byte(`{"pool":"a/b"}`)); err == nil || !strings.Contains(err.Error(), `"pool"`) {
		t.Errorf("bad pool: %v, want an error naming the field", err)
	}
	if got := SpecFromLabels("m1", map[string]string{PoolLabel: " tank "}); got.Pool != "tank" {
		t.Errorf("SpecFromLabels = %+v", got)
	}
	if got := SpecFromLabels("m1", nil); got.Pool != "" {
		t.Errorf("SpecFromLabels(nil) = %+v", got)
	}
}

func TestPruneRunSnapshots(t *testing.T) {
	snaps := []string{"run-1", "mine", "run-2", "run-3-cut", "before-upgrade", "run-4", "run-x"}
	got := PruneRunSnapshots(snaps, KeepRunSnapshots)
	if want := []string{"run-1", "run-2"}; !slices.Equal(got, want) {
		t.Errorf("prune = %v, want %v (operators' snapshots kept)", got, want)
	}
	if got := PruneRunSnapshots([]string{"run-1", "run-2"}, 2); got != nil {
		t.Errorf("two run snapshots: prune %v", got)
	}
	if got := PruneRunSnapshots([]string{"run-1", "run-2"}, 0); !slices.Equal(got, []string{"run-1"}) {
		t.Errorf("keep 0 keeps the newest: prune %v", got)
	}
}
