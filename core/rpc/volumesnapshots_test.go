package rpc

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/volprotect"
)

// TestVolumeSnapshotPayloadsFixture pins list_volume_snapshots' and
// rollback_volume's JSON: each field reads from its JSON name, a later
// field is ignored, re-encoding writes the keys the fixture holds.
func TestVolumeSnapshotPayloadsFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/volume-snapshots.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		List   VolumeRequest         `json:"list_volume_snapshots"`
		Snaps  VolumeSnapshots       `json:"volume_snapshots"`
		Req    RollbackVolumeRequest `json:"rollback_volume"`
		Answer VolumeRolledBack      `json:"volume_rolled_back"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Snaps
	if s.Copy == nil || s.Copy.Floor != 4 || *s.Retention != (volprotect.Retention{Hourly: 24, Daily: 7}) || len(s.Snapshots) != 3 {
		t.Fatalf("volume_snapshots: %+v", s)
	}
	if k := s.Snapshots[2]; !k.Auto || !k.Kept || strings.Join(k.Rules, ",") != "newest,hourly,daily" || k.UsedBytes != 8192 {
		t.Fatalf("kept snapshot: %+v", k)
	}
	if doc.Req != (RollbackVolumeRequest{Volume: "db", Gen: 5, Snapshot: "before-upgrade", DestroyNewer: true}) || doc.Req.Validate() != nil {
		t.Fatalf("rollback_volume: %+v", doc.Req)
	}
	if a := doc.Answer; a.Volume.Name != "db" || strings.Join(a.Destroyed, ",") != "auto-20261207-0900,auto-20261207-1000,#run-4" {
		t.Fatalf("volume_rolled_back: %+v", a)
	}
	reencodes(t, b, map[string]any{"list_volume_snapshots": doc.List, "volume_snapshots": doc.Snaps, "rollback_volume": doc.Req, "volume_rolled_back": doc.Answer})
}

// TestRollbackVolumeValidate: each malformed field is refused by name.
func TestRollbackVolumeValidate(t *testing.T) {
	for field, r := range map[string]RollbackVolumeRequest{
		"volume":   {Volume: "Bad/Name", Gen: 1, Snapshot: "s1"},
		"gen":      {Volume: "db", Snapshot: "s1"},
		"snapshot": {Volume: "db", Gen: 1, Snapshot: "a@b"},
	} {
		err := r.Validate()
		if e, is := err.(*Error); !is || e.Details["field"] != field || !strings.HasPrefix(e.Message, field+": ") {
			t.Errorf("%s: %v", field, err)
		}
	}
}
