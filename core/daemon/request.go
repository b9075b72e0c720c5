package daemon

import (
	"github.com/ployz/ployz/sdk/store"
)

// checkedStore runs a decoded request's checks, for a handler that works
// on the replicated store, which it answers. Each handler decodes with
// rpc.Decode itself, where the payload fuzz coverage test finds it.
func (d *Daemon) checkedStore(req interface{ Validate() error }) (*store.Client, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return d.storeClient()
}
