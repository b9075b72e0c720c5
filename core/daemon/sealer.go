package daemon

import (
	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/store"
)

// clusterSealer is feature.ClusterSealer over this Machine's data
// directory: certificate keys and basic auth hashes are sealed with it.
func (d *Daemon) clusterSealer(purpose, table, field, what string) (*store.Sealer, error) {
	return feature.ClusterSealer(d.cfg.DataDir, purpose, table, field, what)
}
