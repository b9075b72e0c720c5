package daemon

import (
	"context"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/sdk/store"
)

// idlePeriod is how often a loop that follows the store by subscription
// re-reads it with no change reported: a net under the subscriptions.
// While they are not open the loops keep their short periods, so an idle
// Machine spends nothing on rows that did not change.
const idlePeriod = 30 * time.Second

// watchStore follows queries on this Machine's store until ctx ends
// (store.Watch); it asks for the current store client at every
// subscription, so a store reopened by a reset or rejoin is followed.
func (d *Daemon) watchStore(ctx context.Context, queries ...string) *store.Watch {
	do := func(f func(*store.Client) error) error {
		c, err := d.storeClient()
		if err != nil {
			return err
		}
		return f(c)
	}
	return store.NewWatch(ctx, do, queries, d.log.Named("watch"))
}

// waitPeriod is how long a loop with period busy waits for w: idlePeriod
// when its subscriptions are live and it has nothing pending.
func waitPeriod(w *store.Watch, busy time.Duration, pending bool) time.Duration {
	if w != nil && w.Live() && !pending {
		return idlePeriod
	}
	return busy
}

// pause waits d, or less when w reports a change; false when ctx ended.
var pause = feature.Pause
