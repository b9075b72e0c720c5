package feature

import (
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// ClusterSealer is the sealer of table's field under a key derived from
// the Cluster secret in dataDir for purpose; what names the sealed value
// in the refusal when the Machine has no secret (not yet in a Cluster).
func ClusterSealer(dataDir, purpose, table, field, what string) (*store.Sealer, error) {
	secret, err := store.LoadClusterSecret(dataDir)
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeFailedPrecond, "no Cluster secret on this Machine to seal %s with: %v", what, err)
	}
	s, err := store.NewSealer(secret, purpose, table, field)
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeFailedPrecond, "%v", err)
	}
	return s, nil
}
