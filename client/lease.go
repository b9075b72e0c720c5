package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Lease timing: a lease lives leaseTTL past its last renewal and is
// renewed every leaseTTL/3, so a holder that dies frees its scope within
// leaseTTL; a waiting command polls every leasePoll. Tests shorten them.
var (
	leaseTTL  = 60 * time.Second
	leasePoll = 2 * time.Second
)

// Lease scopes: the namespace a Deploy, scale, restart, rollback, removal
// or drain redeploy changes, the volume a Volume Run moves, and the
// Cluster's enrollment (subnet choice and join).

// NamespaceScope is the lease scope of a namespace's changes.
func NamespaceScope(ns string) string { return "namespace:" + ns }

// VolumeScope is the lease scope of a volume's Volume Runs.
func VolumeScope(name string) string { return "volume:" + name }

// EnrollScope is the lease scope enrollments share.
const EnrollScope = "enroll"

// LeaseHeldError refuses a command whose scope another holder leases.
type LeaseHeldError struct {
	Scope   string            `json:"scope"`
	Holder  operator.Operator `json:"holder"`
	Command string            `json:"command"`
	Since   time.Time         `json:"since"`
	Expires time.Time         `json:"expires"`
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%s is held by %s running %q since %s (lease expires %s unless renewed); wait for it to finish",
		e.Scope, e.Holder, e.Command, e.Since.UTC().Format(time.RFC3339), e.Expires.UTC().Format(time.RFC3339))
}

// LeaseWait says what a Session does when a scope is held: refuse
// (the default) or wait, telling Waiting each time it finds it held.
type LeaseWait struct {
	Wait    bool
	Waiting func(*LeaseHeldError)
}

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
	h, err := s.takeLease(ctx, scope, command, w)
	if err != nil {
		return nil, err
	}
	return h.release, nil
}

// Hold is Lease with the Session's LeaseWait, and a context that ends
// when the lease is lost (a renewal refused, or none succeeding before
// it expired): the command stops before its next step. lost, when set,
// hears why at once (from the renewing goroutine).
func (s *Session) Hold(ctx context.Context, scope, command string, lost func(error)) (context.Context, func(), error) {
	h, err := s.takeLease(ctx, scope, command, s.leaseWait)
	if err != nil {
		return ctx, func() {}, err
	}
	h.lost = lost
	return h.ctx, h.release, nil
}

// heldLease is a lease this Session holds and renews.
type heldLease struct {
	s       *Session
	scope   string
	nonce   string
	ctx     context.Context
	stop    context.CancelCauseFunc
	done    chan struct{}
	once    sync.Once
	granted bool // false: the entry predates leases
	lost    func(error)
}

func (s *Session) takeLease(ctx context.Context, scope, command string, w LeaseWait) (*heldLease, error) {
	if err := rpc.ValidLeaseScope(scope); err != nil {
		return nil, err
	}
	h := &heldLease{s: s, scope: scope, nonce: newNonce(), done: make(chan struct{})}
	for {
		err := h.acquire(ctx, command)
		var held *LeaseHeldError
		if err == nil || !errors.As(err, &held) || !w.Wait {
			if err != nil {
				return nil, err
			}
			break
		}
		if w.Waiting != nil {
			w.Waiting(held)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w (last: %v)", scope, ctx.Err(), err)
		case <-time.After(leasePoll):
		}
	}
	h.ctx, h.stop = context.WithCancelCause(ctx)
	if h.granted {
		h.ctx = context.WithValue(h.ctx, leaseNonceKey(scope), h.nonce)
		go h.renew()
	} else {
		close(h.done)
	}
	return h, nil
}

// acquire asks the entry once. An entry from before leases (it does
// not serve acquire_lease) grants nothing and refuses nothing: the
// command runs unleased, as it did there before.
func (h *heldLease) acquire(ctx context.Context, command string) error {
	op := h.s.Operator()
	req := rpc.AcquireLeaseRequest{Scope: h.scope, Holder: rpc.LeaseHolder{Name: op.Name, KeyFingerprint: op.KeyFingerprint},
		Command: command, Nonce: h.nonce, Expires: time.Now().Add(leaseTTL).UnixMilli()}
	err := rpc.InvokeInto(ctx, h.s.ent, rpc.Target{}, rpc.AcquireLease, req, nil)
	var e *rpc.Error
	switch {
	case err == nil:
		h.granted = true
		return nil
	case errors.As(err, &e) && e.Code == rpc.CodeUnsupported && e.Details["command"] == rpc.CmdAcquireLease:
		return nil
	}
	if held := heldError(err); held != nil {
		return held
	}
	return fmt.Errorf("lease %s: %w", h.scope, err)
}

// heldError rebuilds a lease-held refusal from its details; nil when
// err is not one.
func heldError(err error) *LeaseHeldError {
	var e *rpc.Error
	if !errors.As(err, &e) || e.Code != rpc.CodeConflict || e.Details[rpc.DetailLeaseHolder] == nil {
		return nil
	}
	str := func(k string) string { v, _ := e.Details[k].(string); return v }
	ms := func(k string) time.Time { v, _ := e.Details[k].(float64); return time.UnixMilli(int64(v)) }
	return &LeaseHeldError{Scope: str("scope"), Holder: operator.Operator{Name: str(rpc.DetailLeaseHolder), KeyFingerprint: str(rpc.DetailLeaseFingerprint)},
		Command: str(rpc.DetailLeaseCommand), Since: ms(rpc.DetailLeaseStarted), Expires: ms(rpc.DetailLeaseExpires)}
}

// renew extends the lease every leaseTTL/3 until released. A refused
// renewal (the lease went to another) or none succeeding before the
// lease would expire ends h.ctx with the reason.
func (h *heldLease) renew() {
	defer close(h.done)
	t := time.NewTicker(leaseTTL / 3)
	defer t.Stop()
	until := time.Now().Add(leaseTTL)
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		next := time.Now().Add(leaseTTL)
		err := rpc.InvokeInto(h.ctx, h.s.ent, rpc.Target{}, rpc.RenewLease, rpc.RenewLeaseRequest{Scope: h.scope, Nonce: h.nonce, Expires: next.UnixMilli()}, nil)
		var e *rpc.Error
		switch {
		case err == nil:
			until = next
		case errors.As(err, &e) && (e.Code == rpc.CodeConflict || e.Code == rpc.CodeFailedPrecond):
			h.lose(fmt.Errorf("lease %s lost, stopping before the next step: %w", h.scope, err))
			return
		case time.Now().Add(leaseTTL / 3).After(until):
			h.lose(fmt.Errorf("lease %s: no renewal before it expires, stopping before the next step: %w", h.scope, err))
			return
		}
	}
}

func (h *heldLease) lose(err error) {
	if h.lost != nil {
		h.lost(err)
	}
	h.stop(err)
}

// leaseCommand names a Deploy plan's operation in its lease.
func (dp *DeployPlan) leaseCommand() string {
	if dp.Why != "" {
		return dp.Why
	}
	return "deploy"
}

// release stops renewing and frees the lease (best effort: one the
// entry does not hear about expires).
func (h *heldLease) release() {
	h.once.Do(func() {
		h.stop(nil)
		<-h.done
		if !h.granted {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), 10*time.Second)
		defer cancel()
		rpc.InvokeInto(ctx, h.s.ent, rpc.Target{}, rpc.ReleaseLease, rpc.ReleaseLeaseRequest{Scope: h.scope, Nonce: h.nonce}, nil) // an unreleased lease expires
	})
}

// Leases lists the Cluster's live leases.
func (s *Session) Leases(ctx context.Context) ([]rpc.Lease, error) {
	var out rpc.Leases
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListLeases, rpc.None{}, &out); err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out.Leases, nil
}

func newNonce() string {
	b := make([]byte, 12)
	rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

// leaseNonceKey keys a held lease's nonce in the context Hold answers.
type leaseNonceKey string

// HeldLeaseNonce is the nonce of scope's lease held for ctx (a context
// Hold answered), "" when none was granted: an entry checks a Volume
// Run's begin against it.
func HeldLeaseNonce(ctx context.Context, scope string) string {
	n, _ := ctx.Value(leaseNonceKey(scope)).(string)
	return n
}
