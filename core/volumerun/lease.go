package volumerun

import "context"

// LeaseFunc takes scope's lease for command and answers a context that
// ends if the lease is lost, and its release (client.Session.Hold with
// a handler for the loss).
type LeaseFunc func(ctx context.Context, scope, command string) (context.Context, func(), error)

// lease takes the volume's lease for a run of kind, so two operators'
// runs on one volume never interleave their steps.
func (rn *Runner) lease(ctx context.Context, volume, kind string) (context.Context, func(), error) {
	if rn.Lease == nil {
		return ctx, func() {}, nil
	}
	return rn.Lease(ctx, "volume:"+volume, "volume "+kind)
}
