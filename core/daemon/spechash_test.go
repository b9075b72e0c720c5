package daemon

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// salt_spec_hashes salts with the Cluster secret's spec-hash derivation
// (never the secret itself, never another derivation), refuses a bad
// digest naming it, and a Machine without a secret refuses.
func TestSaltSpecHashes(t *testing.T) {
	d, _, _ := machineDaemon(t, "m1")
	ctx := context.Background()
	dg := strings.Repeat("0a", 32)
	out, err := featuretest.Typed(d.saltSpecHashes)(ctx, json.RawMessage(`{"digests":["`+dg+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := out.(rpc.SaltSpecHashesResult).Hashes
	secret, err := store.LoadClusterSecret(d.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(k []byte) string {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(dg))
		return "s1:" + hex.EncodeToString(m.Sum(nil)[:8])
	}
	if len(got) != 1 || got[0] != mac(secret.Derive("spec-hash")) {
		t.Fatalf("hashes %v, want the HMAC under the spec-hash derivation", got)
	}
	if got[0] == mac(secret.Derive("gossip")) {
		t.Fatal("salted with the gossip key or the secret itself")
	}
	for payload, field := range map[string]string{
		`{"digests":[]}`:                              "digests",
		`{"digests":["` + dg + `","zz"]}`:             "digests[1]",
		`{"digests":["` + strings.ToUpper(dg) + `"]}`: "digests[0]",
		`{"digests":["` + dg[:62] + `"]}`:             "digests[0]",
		`{"digests":"` + dg + `"}`:                    "digests",
	} {
		_, err := featuretest.Typed(d.saltSpecHashes)(ctx, json.RawMessage(payload))
		if featuretest.Code(err) != rpc.CodeInvalidArgument || featuretest.Detail(err, "field") != field {
			t.Fatalf("%s: %v, want invalid_argument naming %q", payload, err, field)
		}
	}
	if err := os.Remove(store.ClusterSecretPath(d.cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := featuretest.Typed(d.saltSpecHashes)(ctx, json.RawMessage(`{"digests":["`+dg+`"]}`)); featuretest.Code(err) != rpc.CodeFailedPrecond {
		t.Fatalf("without a secret: %v, want failed_precondition", err)
	}
}
