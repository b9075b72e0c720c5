package feature

import (
	"context"
	"time"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// StoreHost is what a feature over the replicated store needs of the
// daemon.
type StoreHost interface {
	// Store is this Machine's store client, or why it has none yet.
	Store() (*sdkstore.Client, error)
	// MachineID is this Machine's ID, the owner of the rows it writes.
	MachineID() string
}

// CheckedStore runs a decoded request's checks, for a handler that works
// on the replicated store, which it answers.
func CheckedStore(h StoreHost, req interface{ Validate() error }) (*sdkstore.Client, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return h.Store()
}

// Pause waits d, or less when w reports a change; false when ctx ended.
func Pause(ctx context.Context, w *sdkstore.Watch, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-w.C:
	}
	return true
}
