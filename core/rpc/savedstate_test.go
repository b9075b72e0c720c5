package rpc

import (
	"encoding/json"
	"os"
	"testing"
)

// TestSavedStatePayloadFixtures pins save_revision's, list_revisions'
// and put_deploy_record's JSON: the compose file travels as base64.
func TestSavedStatePayloadFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/saved-state.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Save   SaveRevisionRequest    `json:"save_revision"`
		List   RevisionList           `json:"revision_list"`
		Record PutDeployRecordRequest `json:"put_deploy_record"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if string(doc.Save.Compose) != "name: shop\n" || doc.Save.SourceRevision != 3 || doc.Save.Operator.KeyFingerprint != "SHA256:abc" {
		t.Fatalf("save_revision: %+v", doc.Save)
	}
	if err := doc.Save.Validate(); err != nil {
		t.Fatal(err)
	}
	if r := doc.List.Revisions; len(r) != 1 || r[0].Revision != 1 || string(r[0].Compose) != "name: shop\n" || r[0].Removal {
		t.Fatalf("revision_list: %+v", doc.List)
	}
	if err := doc.Record.Validate(); err != nil || doc.Record.Revision != 1 {
		t.Fatalf("put_deploy_record: %+v %v", doc.Record, err)
	}
	reencodes(t, b, map[string]any{"save_revision": doc.Save, "revision_list": doc.List, "put_deploy_record": doc.Record})
}
