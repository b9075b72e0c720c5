package leases

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// DefaultSettle is how long an acquire waits after its write (and a job's claim) before
// it re-reads the row: long enough for a concurrent write another entry
// accepted to reach this store and the CRDT merge to pick one.
const DefaultSettle = time.Second

// Feature serves the lease commands. It serializes this entry's
// read-then-write of lease rows; writes through other entries are
// settled by re-reading (Settle). Make one per Machine.
type Feature struct {
	host feature.StoreHost
	log  hclog.Logger
	mu   sync.Mutex
	// SettleTime overrides DefaultSettle (tests).
	SettleTime time.Duration
}

// New returns the feature over host.
func New(host feature.StoreHost, log hclog.Logger) *Feature { return &Feature{host: host, log: log} }

// Routes are the lease commands.
func (f *Feature) Routes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.AcquireLease, f.acquireLease),
		rpc.Bind(rpc.RenewLease, f.renewLease),
		rpc.Bind(rpc.ReleaseLease, f.releaseLease),
		rpc.Bind(rpc.ListLeases, f.listLeases),
	}
}

// acquireLease grants the scope's lease when its row is absent, expired
// or already the caller's, then re-reads it once the write settled: a
// concurrent grant by another entry may have won the merge, and then the
// caller is refused naming that holder.
func (f *Feature) acquireLease(ctx context.Context, req rpc.AcquireLeaseRequest) (rpc.Lease, error) {
	if err := req.Validate(); err != nil {
		return rpc.Lease{}, err
	}
	if _, err := withLease(ctx, f, req.Scope, func(st *sdkstore.Client, row sdkstore.Row[store.LeaseBody], ok bool) (struct{}, error) {
		return struct{}{}, f.grantLease(ctx, st, req, row, ok)
	}); err != nil {
		return rpc.Lease{}, err
	}
	st, err := f.host.Store()
	if err != nil {
		return rpc.Lease{}, err
	}
	f.Settle(ctx, st)
	row, ok, err := store.Leases(st).Get(ctx, req.Scope)
	if err != nil {
		return rpc.Lease{}, rpc.Errorf(rpc.CodeUnavailable, "re-read lease %s: %v", req.Scope, err)
	}
	if !ok || row.Body.Nonce != req.Nonce {
		if ok && row.Body.Live(time.Now().UnixMilli()) {
			return rpc.Lease{}, rpc.LeaseHeld(leaseView(row))
		}
		return rpc.Lease{}, rpc.Errorf(rpc.CodeUnavailable, "lease %s was released while it was granted; try again", req.Scope)
	}
	f.log.Info("lease granted", "scope", req.Scope, "holder", req.Holder.Name, "command", req.Command)
	return leaseView(row), nil
}

// withLease reads scope's row and runs fn with it, holding this entry's
// grant lock so no other grant, renewal or release here interleaves.
func withLease[T any](ctx context.Context, f *Feature, scope string, fn func(*sdkstore.Client, sdkstore.Row[store.LeaseBody], bool) (T, error)) (T, error) {
	var none T
	st, err := f.host.Store()
	if err != nil {
		return none, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	row, ok, err := store.Leases(st).Get(ctx, scope)
	if err != nil {
		return none, rpc.Errorf(rpc.CodeUnavailable, "read lease %s: %v", scope, err)
	}
	return fn(st, row, ok)
}

// grantLease writes the caller's row unless a live lease of another
// nonce holds the scope.
func (f *Feature) grantLease(ctx context.Context, st *sdkstore.Client, req rpc.AcquireLeaseRequest, row sdkstore.Row[store.LeaseBody], ok bool) error {
	now := time.Now().UnixMilli()
	started := now
	if ok && row.Body.Nonce == req.Nonce {
		started = row.Body.Started
	} else if ok && row.Body.Live(now) {
		return rpc.LeaseHeld(leaseView(row))
	}
	body := store.LeaseBody{Holder: store.LeaseHolder(req.Holder), Command: req.Command, Started: started,
		Expires: req.Expires, Nonce: req.Nonce, Entry: f.host.MachineID()}
	if _, err := store.Leases(st).Put(ctx, sdkstore.Row[store.LeaseBody]{Key: req.Scope, Owner: f.host.MachineID(), Body: body}); err != nil {
		return rpc.Errorf(rpc.CodeUnavailable, "write lease %s: %v", req.Scope, err)
	}
	return nil
}

// Settle waits for a concurrent write to reach this store: the
// settle time, then while the store reports gaps (at most the settle
// time again). A store with no peer up has nothing to wait for; that
// is also the partitioned case docs/leases.md describes.
func (f *Feature) Settle(ctx context.Context, st *sdkstore.Client) {
	h, err := st.Health(ctx)
	if err != nil || h.Members == 0 {
		return
	}
	settle := DefaultSettle
	if f.SettleTime > 0 {
		settle = f.SettleTime
	}
	deadline := time.Now().Add(2 * settle)
	sleepCtx(ctx, settle)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if h, err := st.Health(ctx); err != nil || h.Gaps == 0 {
			return
		}
		sleepCtx(ctx, settle/10)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// renewLease extends the lease the caller holds; one it lost (taken
// over, merged away, released) is refused, so its command stops.
func (f *Feature) renewLease(ctx context.Context, req rpc.RenewLeaseRequest) (rpc.Lease, error) {
	if err := req.Validate(); err != nil {
		return rpc.Lease{}, err
	}
	return withLease(ctx, f, req.Scope, func(st *sdkstore.Client, row sdkstore.Row[store.LeaseBody], ok bool) (rpc.Lease, error) {
		switch {
		case !ok:
			return rpc.Lease{}, rpc.Errorf(rpc.CodeFailedPrecond, "lease %s is no longer held (released or expired and freed)", req.Scope)
		case row.Body.Nonce != req.Nonce:
			return rpc.Lease{}, rpc.LeaseHeld(leaseView(row))
		}
		row.Body.Expires, row.Owner, row.UpdatedAt = req.Expires, f.host.MachineID(), 0
		if _, err := store.Leases(st).Put(ctx, row); err != nil {
			return rpc.Lease{}, rpc.Errorf(rpc.CodeUnavailable, "write lease %s: %v", req.Scope, err)
		}
		return leaseView(row), nil
	})
}

// releaseLease deletes the caller's lease; another's is left alone.
func (f *Feature) releaseLease(ctx context.Context, req rpc.ReleaseLeaseRequest) (struct{}, error) {
	if err := req.Validate(); err != nil {
		return struct{}{}, err
	}
	return withLease(ctx, f, req.Scope, func(st *sdkstore.Client, row sdkstore.Row[store.LeaseBody], ok bool) (struct{}, error) {
		if ok && row.Body.Nonce == req.Nonce {
			if _, err := store.Leases(st).Delete(ctx, req.Scope); err != nil {
				return struct{}{}, rpc.Errorf(rpc.CodeUnavailable, "delete lease %s: %v", req.Scope, err)
			}
		}
		return struct{}{}, nil
	})
}

// listLeases answers the live leases.
func (f *Feature) listLeases(ctx context.Context, _ rpc.None) (rpc.Leases, error) {
	st, err := f.host.Store()
	if err != nil {
		return rpc.Leases{}, err
	}
	rows, err := store.Leases(st).List(ctx)
	if err != nil {
		return rpc.Leases{}, rpc.Errorf(rpc.CodeUnavailable, "read leases: %v", err)
	}
	out := rpc.Leases{Leases: []rpc.Lease{}}
	now := time.Now().UnixMilli()
	for _, r := range rows {
		if r.Body.Live(now) {
			out.Leases = append(out.Leases, leaseView(r))
		}
	}
	return out, nil
}

func leaseView(r sdkstore.Row[store.LeaseBody]) rpc.Lease {
	return rpc.Lease{Scope: r.Key, Holder: rpc.LeaseHolder(r.Body.Holder), Command: r.Body.Command,
		Started: r.Body.Started, Expires: r.Body.Expires, Entry: r.Body.Entry}
}
