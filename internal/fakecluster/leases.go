package fakecluster

import (
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// fakeLease is one scope's lease as the entry's store would hold it.
type fakeLease struct {
	rpc.Lease
	nonce string
}

// leaseRoutes answers the lease commands from memory with the entry's
// rules: grant when absent, expired or the caller's; renew and release
// only with the holder's nonce.
func (fc *Cluster) leaseRoutes(srv *rpc.Server, m *Machine) {
	HandleMethod(fc, srv, m, rpc.AcquireLease, valid(func(req rpc.AcquireLeaseRequest) (rpc.Lease, error) {
		now := time.Now().UnixMilli()
		l, ok := fc.leases[req.Scope]
		if ok && l.nonce != req.Nonce && l.Expires > now {
			return rpc.Lease{}, rpc.LeaseHeld(l.Lease)
		}
		if !ok || l.nonce != req.Nonce {
			l = fakeLease{Lease: rpc.Lease{Scope: req.Scope, Started: now}, nonce: req.Nonce}
		}
		l.Holder, l.Command, l.Expires = req.Holder, req.Command, req.Expires
		fc.leases[req.Scope] = l
		return l.Lease, nil
	}))
	HandleMethod(fc, srv, m, rpc.RenewLease, valid(func(req rpc.RenewLeaseRequest) (rpc.Lease, error) {
		l, ok := fc.leases[req.Scope]
		if !ok {
			return rpc.Lease{}, rpc.Errorf(rpc.CodeFailedPrecond, "lease %s is no longer held", req.Scope)
		}
		if l.nonce != req.Nonce {
			return rpc.Lease{}, rpc.LeaseHeld(l.Lease)
		}
		l.Expires = req.Expires
		fc.leases[req.Scope] = l
		fc.renewals++
		return l.Lease, nil
	}))
	HandleMethod(fc, srv, m, rpc.ReleaseLease, valid(func(req rpc.ReleaseLeaseRequest) (struct{}, error) {
		if l, ok := fc.leases[req.Scope]; ok && l.nonce == req.Nonce {
			delete(fc.leases, req.Scope)
		}
		return struct{}{}, nil
	}))
	HandleMethod(fc, srv, m, rpc.ListLeases, func(rpc.None) (rpc.Leases, error) {
		out := rpc.Leases{Leases: []rpc.Lease{}}
		for _, l := range fc.leases {
			out.Leases = append(out.Leases, l.Lease)
		}
		return out, nil
	})
}

// HoldLease makes another operator hold scope's lease for ttl.
func (fc *Cluster) HoldLease(scope, holder, command string, ttl time.Duration) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.leases[scope] = fakeLease{Lease: rpc.Lease{Scope: scope, Holder: rpc.LeaseHolder{Name: holder}, Command: command,
		Started: time.Now().UnixMilli(), Expires: time.Now().Add(ttl).UnixMilli()}, nonce: "other-" + holder}
}

// TakeLease makes another operator take over scope's lease, as a merge
// after a partition does: the holder's next renewal is refused.
func (fc *Cluster) TakeLease(scope, holder string) {
	fc.HoldLease(scope, holder, "deploy", time.Minute)
}

// Lease is scope's lease, if one is held.
func (fc *Cluster) Lease(scope string) (rpc.Lease, bool) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	l, ok := fc.leases[scope]
	return l.Lease, ok && l.Expires > time.Now().UnixMilli()
}

// Renewals counts the lease renewals the entry granted.
func (fc *Cluster) Renewals() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.renewals
}
