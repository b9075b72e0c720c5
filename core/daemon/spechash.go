package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// specHashKey answers spec_hash_key: the Cluster secret's key for salting
// spec hashes (rpc.CapSpecHashKey). A Machine not in a Cluster has no
// secret and says so.
func (d *Daemon) specHashKey(_ context.Context, _ json.RawMessage) (any, error) {
	secret, err := store.LoadClusterSecret(d.cfg.DataDir)
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeFailedPrecond, "no Cluster secret on this Machine: %v", err)
	}
	return rpc.SpecHashKey{Key: hex.EncodeToString(secret.Derive("spec-hash"))}, nil
}
