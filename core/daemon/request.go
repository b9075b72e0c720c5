package daemon

import (
	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/sdk/store"
)

// checkedStore runs a decoded request's checks, for a handler that works
// on the replicated store, which it answers (feature.CheckedStore).
func (d *Daemon) checkedStore(req interface{ Validate() error }) (*store.Client, error) {
	return feature.CheckedStore(featureHost{d}, req)
}
