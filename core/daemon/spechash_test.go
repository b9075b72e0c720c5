package daemon

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// spec_hash_key hands out the Cluster secret's spec-hash key, never the
// secret itself, and a Machine without a secret refuses.
func TestSpecHashKey(t *testing.T) {
	d, _, _ := machineDaemon(t, "m1")
	out, err := d.specHashKey(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := out.(rpc.SpecHashKey).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := store.LoadClusterSecret(d.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key, secret.Derive("spec-hash")) {
		t.Fatal("the key is not the secret's spec-hash derivation")
	}
	if bytes.Equal(key, secret.Derive("gossip")) {
		t.Fatal("the spec-hash key equals the gossip key")
	}
	if err := os.Remove(store.ClusterSecretPath(d.cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.specHashKey(context.Background(), nil); rpcCode(err) != rpc.CodeFailedPrecond {
		t.Fatalf("without a secret: %v, want failed_precondition", err)
	}
}
