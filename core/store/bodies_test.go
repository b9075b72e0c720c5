package store

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestBodyFixtures pins the JSON of the replicated bodies only ployzd and
// the operator use (docs/formats.md, "Stable promise"; sdk/store pins the
// rows a plugin reads or owns): each fixture decodes, re-encodes
// byte-identically, and still decodes with a field a newer writer added.
func TestBodyFixtures(t *testing.T) {
	raw, err := os.ReadFile("testdata/bodies.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	check := func(name string, v any) {
		t.Helper()
		b, ok := fx[name]
		if !ok {
			t.Fatalf("fixture %q missing", name)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, _ := json.Marshal(v)
		var want bytes.Buffer
		if err := json.Compact(&want, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, want.Bytes()) {
			t.Errorf("%s re-encodes as\n%s\nwant\n%s", name, again, want.Bytes())
		}
		newer := append(bytes.TrimSuffix(bytes.TrimSpace(b), []byte("}")), []byte(`,"added_later":{"x":1}}`)...)
		if err := json.Unmarshal(newer, v); err != nil {
			t.Errorf("%s with an unknown field: %v", name, err)
		}
	}
	check("history", &HistoryBody{})
	check("revision", &RevisionBody{})
	check("deploy_record", &DeployRecordBody{})
	check("lease", &LeaseBody{})
	check("volume_run", &VolumeRunBody{})
	check("allocation", &AllocationBody{})
	check("removal", &RemovalBody{})
}
