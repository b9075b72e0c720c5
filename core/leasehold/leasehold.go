package leasehold

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

// Lease timing: a lease lives TTL past its last renewal and is renewed
// every TTL/3, so a holder that dies frees its scope within TTL; a
// waiting holder polls every Poll. Tests shorten them.
var (
	TTL  = 60 * time.Second
	Poll = 2 * time.Second
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

// HeldError refuses a command whose scope another holder leases.
type HeldError struct {
	Scope   string            `json:"scope"`
	Holder  operator.Operator `json:"holder"`
	Command string            `json:"command"`
	Since   time.Time         `json:"since"`
	Expires time.Time         `json:"expires"`
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is held by %s running %q since %s (lease expires %s unless renewed); wait for it to finish",
		e.Scope, e.Holder, e.Command, e.Since.UTC().Format(time.RFC3339), e.Expires.UTC().Format(time.RFC3339))
}

// Wait says what Hold does when a scope is held: refuse (the default)
// or wait, telling Waiting each time it finds it held.
type Wait struct {
	Wait    bool
	Waiting func(*HeldError)
}

// Holder is who holds leases, through which Entry Machine.
type Holder struct {
	Entry *rpc.Client
	Who   operator.Operator
}

// Hold takes scope's lease for command, waiting while another holds it
// when w.Wait is set (until ctx ends), and renews it in the background
// until release is called. It answers a context that ends when the
// lease is lost (a renewal refused, or none succeeding before it
// expired) and carries the lease's nonce (Nonce); lost, when set, hears
// why at once. A scope held by another is refused with a *HeldError.
// An entry from before leases grants nothing and refuses nothing.
func (hd Holder) Hold(ctx context.Context, scope, command string, w Wait, lost func(error)) (context.Context, func(), error) {
	if err := rpc.ValidLeaseScope(scope); err != nil {
		return ctx, func() {}, err
	}
	h := &held{hd: hd, scope: scope, nonce: newNonce(), done: make(chan struct{}), lost: lost}
	for {
		err := h.acquire(ctx, command)
		var he *HeldError
		if err == nil || !errors.As(err, &he) || !w.Wait {
			if err != nil {
				return ctx, func() {}, err
			}
			break
		}
		if w.Waiting != nil {
			w.Waiting(he)
		}
		select {
		case <-ctx.Done():
			return ctx, func() {}, fmt.Errorf("waiting for %s: %w (last: %v)", scope, ctx.Err(), err)
		case <-time.After(Poll):
		}
	}
	h.ctx, h.stop = context.WithCancelCause(ctx)
	if h.granted {
		h.ctx = context.WithValue(h.ctx, nonceKey(scope), h.nonce)
		go h.renew()
	} else {
		close(h.done)
	}
	return h.ctx, h.release, nil
}

// held is a lease Hold took and renews.
type held struct {
	hd      Holder
	scope   string
	nonce   string
	ctx     context.Context
	stop    context.CancelCauseFunc
	done    chan struct{}
	once    sync.Once
	granted bool // false: the entry predates leases
	lost    func(error)
}

// acquire asks the entry once. An entry from before leases (it does
// not serve acquire_lease) grants nothing and refuses nothing: the
// command runs unleased, as it did there before.
func (h *held) acquire(ctx context.Context, command string) error {
	op := h.hd.Who
	req := rpc.AcquireLeaseRequest{Scope: h.scope, Holder: rpc.LeaseHolder{Name: op.Name, KeyFingerprint: op.KeyFingerprint},
		Command: command, Nonce: h.nonce, Expires: time.Now().Add(TTL).UnixMilli()}
	err := rpc.InvokeInto(ctx, h.hd.Entry, rpc.Target{}, rpc.AcquireLease, req, nil)
	var e *rpc.Error
	switch {
	case err == nil:
		h.granted = true
		return nil
	case errors.As(err, &e) && e.Code == rpc.CodeUnsupported && e.Details["command"] == rpc.CmdAcquireLease:
		return nil
	}
	if he := AsHeld(err); he != nil {
		return he
	}
	return fmt.Errorf("lease %s: %w", h.scope, err)
}

// AsHeld rebuilds a lease-held refusal from its details; nil when err
// is not one.
func AsHeld(err error) *HeldError {
	var e *rpc.Error
	if !errors.As(err, &e) || e.Code != rpc.CodeConflict || e.Details[rpc.DetailLeaseHolder] == nil {
		return nil
	}
	str := func(k string) string { v, _ := e.Details[k].(string); return v }
	ms := func(k string) time.Time { v, _ := e.Details[k].(float64); return time.UnixMilli(int64(v)) }
	return &HeldError{Scope: str("scope"), Holder: operator.Operator{Name: str(rpc.DetailLeaseHolder), KeyFingerprint: str(rpc.DetailLeaseFingerprint)},
		Command: str(rpc.DetailLeaseCommand), Since: ms(rpc.DetailLeaseStarted), Expires: ms(rpc.DetailLeaseExpires)}
}

// renew extends the lease every TTL/3 until released. A refused
// renewal (the lease went to another) or none succeeding before the
// lease would expire ends h.ctx with the reason.
func (h *held) renew() {
	defer close(h.done)
	ttl := TTL
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	until := time.Now().Add(ttl)
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		next := time.Now().Add(ttl)
		err := rpc.InvokeInto(h.ctx, h.hd.Entry, rpc.Target{}, rpc.RenewLease, rpc.RenewLeaseRequest{Scope: h.scope, Nonce: h.nonce, Expires: next.UnixMilli()}, nil)
		var e *rpc.Error
		switch {
		case err == nil:
			until = next
		case errors.As(err, &e) && (e.Code == rpc.CodeConflict || e.Code == rpc.CodeFailedPrecond):
			h.lose(fmt.Errorf("lease %s lost, stopping before the next step: %w", h.scope, err))
			return
		case time.Now().Add(ttl / 3).After(until):
			h.lose(fmt.Errorf("lease %s: no renewal before it expires, stopping before the next step: %w", h.scope, err))
			return
		}
	}
}

func (h *held) lose(err error) {
	if h.lost != nil {
		h.lost(err)
	}
	h.stop(err)
}

// release stops renewing and frees the lease (best effort: one the
// entry does not hear about expires).
func (h *held) release() {
	h.once.Do(func() {
		h.stop(nil)
		<-h.done
		if !h.granted {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), 10*time.Second)
		defer cancel()
		rpc.InvokeInto(ctx, h.hd.Entry, rpc.Target{}, rpc.ReleaseLease, rpc.ReleaseLeaseRequest{Scope: h.scope, Nonce: h.nonce}, nil) // an unreleased lease expires
	})
}

func newNonce() string {
	b := make([]byte, 12)
	rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

// nonceKey keys a held lease's nonce in the context Hold answers.
type nonceKey string

// Nonce is the nonce of scope's lease held for ctx (a context Hold
// answered), "" when none was granted: an entry checks a Volume Run's
// begin against it.
func Nonce(ctx context.Context, scope string) string {
	n, _ := ctx.Value(nonceKey(scope)).(string)
	return n
}
