package daemon

import (
	"context"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// saltSpecHashes answers salt_spec_hashes (rpc.CapSaltSpecHashes): each
// spec digest salted with the Cluster secret's spec-hash key, so the
// planner writes salted hashes without ever holding the key. A Machine
// not in a Cluster has no secret and says so.
func (d *Daemon) saltSpecHashes(_ context.Context, req rpc.SaltSpecHashesRequest) (rpc.SaltSpecHashesResult, error) {
	if err := req.Validate(); err != nil {
		return rpc.SaltSpecHashesResult{}, err
	}
	secret, err := store.LoadClusterSecret(d.cfg.DataDir)
	if err != nil {
		return rpc.SaltSpecHashesResult{}, rpc.Errorf(rpc.CodeFailedPrecond, "no Cluster secret on this Machine to salt spec hashes with: %v", err)
	}
	key := secret.Derive(rpc.SpecHashPurpose)
	out := rpc.SaltSpecHashesResult{Hashes: make([]string, len(req.Digests))}
	for i, dg := range req.Digests {
		out.Hashes[i] = rpc.SaltSpecDigest(key, dg)
	}
	return out, nil
}
