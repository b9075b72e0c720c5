package rpc

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestUpgradeRequestPinned pins the wire shape of upgrade_machine and
// upgrade_plugin's request: a request of a CLI older than signed bundles
// (no proof) still decodes, and the proof's files travel as base64.
func TestUpgradeRequestPinned(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	old := `{"version":"1.2.3","sha256":"` + sum + `","size":10,"plugin":"dns"}`
	var r UpgradeRequest
	if err := json.Unmarshal([]byte(old), &r); err != nil || r.Proof != nil || r.Validate() != nil {
		t.Fatalf("a request without a proof: %+v, %v", r, err)
	}
	if b, _ := json.Marshal(r); string(b) != old {
		t.Fatalf("without a proof\n got %s\nwant %s", b, old)
	}
	r.Proof = &BundleProof{Signature: []byte("sig"), Index: []byte("{}"), IndexSignature: []byte("isig")}
	want := `{"version":"1.2.3","sha256":"` + sum + `","size":10,"plugin":"dns","proof":{"signature":"c2ln","index":"e30=","index_signature":"aXNpZw=="}}`
	if b, _ := json.Marshal(r); string(b) != want {
		t.Fatalf("with a proof\n got %s\nwant %s", b, want)
	}
	var back UpgradeRequest
	if err := json.Unmarshal([]byte(want[:len(want)-1]+`,"future":1}`), &back); err != nil || string(back.Proof.IndexSignature) != "isig" {
		t.Fatalf("decoded %+v, %v", back.Proof, err)
	}
}
