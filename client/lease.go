package client

import (
	"context"
	"fmt"

	"github.com/ployz/ployz/core/leasehold"
	"github.com/ployz/ployz/core/rpc"
)

// Lease scopes: core/leasehold's, which ployzd's scheduled runs share.

// NamespaceScope is the lease scope of a namespace's changes.
func NamespaceScope(ns string) string { return leasehold.NamespaceScope(ns) }

// VolumeScope is the lease scope of a volume's Volume Runs.
func VolumeScope(name string) string { return leasehold.VolumeScope(name) }

// EnrollScope is the lease scope enrollments share.
const EnrollScope = leasehold.EnrollScope

// LeaseHeldError refuses a command whose scope another holder leases.
type LeaseHeldError = leasehold.HeldError

// LeaseWait says what a Session does when a scope is held: refuse
// (the default) or wait, telling Waiting each time it finds it held.
type LeaseWait = leasehold.Wait

// SetLeaseWait sets what the Session's commands do when their scope is
// held.
func (s *Session) SetLeaseWait(w LeaseWait) { s.leaseWait = w }

// Lease takes scope's lease for command, waiting while another holds it
// when wait is set (until ctx ends), and renews it in the background
// until release is called. A scope held by another is refused with a
// *LeaseHeldError.
func (s *Session) Lease(ctx context.Context, scope, command string, wait bool) (release func(), err error) {
	w := s.leaseWait
	w.Wait = wait
	_, release, err = s.holder().Hold(ctx, scope, command, w, nil)
	if err != nil {
		return nil, err
	}
	return release, nil
}

// Hold is Lease with the Session's LeaseWait, and a context that ends
// when the lease is lost (a renewal refused, or none succeeding before
// it expired): the command stops before its next step. lost, when set,
// hears why at once (from the renewing goroutine).
func (s *Session) Hold(ctx context.Context, scope, command string, lost func(error)) (context.Context, func(), error) {
	return s.holder().Hold(ctx, scope, command, s.leaseWait, lost)
}

// holder holds leases as this Session's operator through its entry.
func (s *Session) holder() leasehold.Holder {
	return leasehold.Holder{Entry: s.ent, Who: s.Operator()}
}

// leaseCommand names a Deploy plan's operation in its lease.
func (dp *DeployPlan) leaseCommand() string {
	if dp.Why != "" {
		return dp.Why
	}
	return "deploy"
}

// Leases lists the Cluster's live leases.
func (s *Session) Leases(ctx context.Context) ([]rpc.Lease, error) {
	var out rpc.Leases
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListLeases, rpc.None{}, &out); err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out.Leases, nil
}

// HeldLeaseNonce is the nonce of scope's lease held for ctx (a context
// Hold answered), "" when none was granted: an entry checks a Volume
// Run's begin against it.
func HeldLeaseNonce(ctx context.Context, scope string) string { return leasehold.Nonce(ctx, scope) }
