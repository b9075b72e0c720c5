package daemon

import (
	"context"
	"encoding/json"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// saltSpecHashes answers salt_spec_hashes (rpc.CapSaltSpecHashes): each
// spec digest salted with the Cluster secret's spec-hash key, so the
// planner writes salted hashes without ever holding the key. A Machine
// not in a Cluster has no secret and says so.
func (d *Daemon) saltSpecHashes(_ context.Context, raw json.RawMessage) (any, error) {
	var req rpc.SaltSpecHashesRequest
	if err := rpc.Decode(rpc.CmdSaltSpecHashes, raw, &req); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	secret, err := store.LoadClusterSecret(d.cfg.DataDir)
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeFailedPrecond, "no Cluster secret on this Machine to salt spec hashes with: %v", err)
	}
	key := secret.Derive(rpc.SpecHashPurpose)
	out := rpc.SaltSpecHashesResult{Hashes: make([]string, len(req.Digests))}
	for i, dg := range req.Digests {
		out.Hashes[i] = rpc.SaltSpecDigest(key, dg)
	}
	return out, nil
}
