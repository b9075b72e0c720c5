package rpc

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestInspectionFixture pins the inspect answer's store_events_dropped
// and isolation:
// read by table from a daemon that has it, absent from an older one (and
// from a daemon that dropped nothing: omitted, not an empty object), and
// a later field is ignored.
func TestInspectionFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/inspection.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		New Inspection `json:"inspection"`
		Old Inspection `json:"old_inspection"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if d := doc.New.StoreEventsDropped; len(d) != 2 || d["containers"] != 3 || d["machines"] != 1 || doc.New.DaemonVersion != "1.1.0" {
		t.Fatalf("inspection: %+v", doc.New)
	}
	if doc.New.OS != "linux" || doc.New.Arch != "arm64" || doc.Old.Arch != "" {
		t.Fatalf("os/arch: new %s/%s, old %q", doc.New.OS, doc.New.Arch, doc.Old.Arch)
	}
	if iso := doc.New.Isolation; iso == nil || iso.Generation != 4 || iso.ChangedAt != "2026-12-06T20:00:00Z" || iso.Networks != 2 || iso.Addresses != 5 || doc.Old.Isolation != nil {
		t.Fatalf("isolation: new %+v, old %+v", doc.New.Isolation, doc.Old.Isolation)
	}
	if doc.Old.StoreEventsDropped != nil || doc.Old.ID == "" {
		t.Fatalf("older daemon's inspection: %+v", doc.Old)
	}
	out, err := json.Marshal(doc.Old)
	if err != nil || strings.Contains(string(out), "store_events_dropped") {
		t.Fatalf("no drops must encode no field: %s %v", out, err)
	}
	out, err = json.Marshal(doc.New)
	if err != nil || !strings.Contains(string(out), `"store_events_dropped":{"containers":3,"machines":1}`) {
		t.Fatalf("drops encode as %s %v", out, err)
	}
}
