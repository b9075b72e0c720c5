package rpc

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/ployz/ployz/core/volprotect"
)

// TestVolumePolicyPayloadsFixture pins put_volume_policies: each field
// reads from its JSON name, a later field is ignored, and re-encoding
// writes the keys the fixture holds.
func TestVolumePolicyPayloadsFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/volume-policies.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Put  PutVolumePoliciesRequest `json:"put_volume_policies"`
		Put2 VolumePoliciesPut        `json:"volume_policies_put"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if err := doc.Put.Validate(); err != nil {
		t.Fatal(err)
	}
	p := doc.Put.Policies[0].Policy
	if !doc.Put.Prune || p.Snapshots != (volprotect.Retention{Hourly: 24, Daily: 7, Weekly: 4}) || p.Mirror.Machine != "m2" || doc.Put.Policies[1].Policy.Mirror.Labels["zone"] != "b" {
		t.Fatalf("put_volume_policies: %+v", doc.Put)
	}
	reencodes(t, b, map[string]any{"put_volume_policies": doc.Put, "volume_policies_put": doc.Put2})
}

// TestPutVolumePoliciesValidate: a bad volume name or policy is refused
// naming the field.
func TestPutVolumePoliciesValidate(t *testing.T) {
	for field, d := range map[string]VolumePolicyDecl{
		"policies[].volume": {Volume: "Bad/Name"},
		"policies[].policy": {Volume: "db", Policy: volprotect.Policy{Snapshots: volprotect.Retention{Daily: -1}}},
	} {
		err := PutVolumePoliciesRequest{Namespace: "shop-prod", Policies: []VolumePolicyDecl{d}}.Validate()
		if e, is := err.(*Error); !is || e.Details["field"] != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}
