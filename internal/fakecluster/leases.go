package fakecluster

import (
	"encoding/json"
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
func (fc *Cluster) leaseRoutes(handle func(string, func(json.RawMessage) (any, error))) {
	handle(rpc.CmdAcquireLease, func(raw json.RawMessage) (any, error) {
		var req rpc.AcquireLeaseRequest
		if err := decodeValid(rpc.CmdAcquireLease, raw, &req); err != nil {
			return nil, err
		}
		now := time.Now().UnixMilli()
		l, ok := fc.leases[req.Scope]
		if ok && l.nonce != req.Nonce && l.Expires > now {
			return nil, rpc.LeaseHeld(l.Lease)
		}
		if !ok || l.nonce != req.Nonce {
			l = fakeLease{Lease: rpc.Lease{Scope: req.Scope, Started: now}, nonce: req.Nonce}
		}
		l.Holder, l.Command, l.Expires = req.Holder, req.Command, req.Expires
		fc.leases[req.Scope] = l
		return l.Lease, nil
	})
	handle(rpc.CmdRenewLease, func(raw json.RawMessage) (any, error) {
		var req rpc.RenewLeaseRequest
		if err := decodeValid(rpc.CmdRenewLease, raw, &req); err != nil {
			return nil, err
		}
		l, ok := fc.leases[req.Scope]
		if !ok {
			return nil, rpc.Errorf(rpc.CodeFailedPrecond, "lease %s is no longer held", req.Scope)
		}
		if l.nonce != req.Nonce {
			return nil, rpc.LeaseHeld(l.Lease)
		}
		l.Expires = req.Expires
		fc.leases[req.Scope] = l
		fc.renewals++
		return l.Lease, nil
	})
	handle(rpc.CmdReleaseLease, func(raw json.RawMessage) (any, error) {
		var req rpc.ReleaseLeaseRequest
		if err := decodeValid(rpc.CmdReleaseLease, raw, &req); err != nil {
			return nil, err
		}
		if l, ok := fc.leases[req.Scope]; ok && l.nonce == req.Nonce {
			delete(fc.leases, req.Scope)
		}
		return struct{}{}, nil
	})
	handle(rpc.CmdListLeases, func(json.RawMessage) (any, error) {
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
