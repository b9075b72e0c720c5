// Package allocations is the daemon's allocation feature: the history of
// the subnets Machines were given (put_allocation, list_allocations) and
// the removal marks of projects being removed (mark_removal,
// clear_removal, list_removals), in the replicated store
// (docs/formats.md).
package allocations

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// allocationMu serializes put_allocation's read-check-write on this
// entry. Operators enrolling at once are serialized across entries by
// the "enroll" lease; this keeps one entry's own writes from racing.
var allocationMu sync.Mutex

// Feature serves the allocation history and the removal marks.
type Feature struct{ host feature.StoreHost }

// New returns the feature over host.
func New(host feature.StoreHost) *Feature { return &Feature{host: host} }

// Routes are the allocation and removal-mark commands.
func (f *Feature) Routes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.PutAllocation, f.putAllocation),
		rpc.Bind(rpc.ListAllocations, f.listAllocations),
		rpc.Bind(rpc.MarkRemoval, f.markRemoval),
		rpc.Bind(rpc.ClearRemoval, f.clearRemoval),
		rpc.Bind(rpc.ListRemovals, f.listRemovals),
	}
}

// putAllocation records a Machine's subnet, or moves its state. A
// Machine keeps the subnet it was first given; a subnet in the history
// or on a published Machine under another id is refused, so no subnet
// is handed out twice whoever asks.
func (f *Feature) putAllocation(ctx context.Context, req rpc.PutAllocationRequest) (rpc.Allocation, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.Allocation{}, err
	}
	allocationMu.Lock()
	defer allocationMu.Unlock()
	rows, err := store.Allocations(st).List(ctx)
	if err != nil {
		return rpc.Allocation{}, rpc.Errorf(rpc.CodeUnavailable, "read allocations: %v", err)
	}
	if err := subnetTaken(ctx, st, rows, req.Allocation); err != nil {
		return rpc.Allocation{}, err
	}
	row := allocationRow(rows, req.Allocation, f.host.MachineID())
	if _, err := store.Allocations(st).Put(ctx, row); err != nil {
		return rpc.Allocation{}, rpc.Errorf(rpc.CodeUnavailable, "write allocation: %v", err)
	}
	return allocationView(row), nil
}

// subnetTaken refuses a's subnet when a's Machine was given another one,
// or another Machine holds it in the history or in the machines table.
func subnetTaken(ctx context.Context, st *sdkstore.Client, rows []sdkstore.Row[store.AllocationBody], a rpc.Allocation) error {
	hist := rpc.Allocations{}
	for _, r := range rows {
		hist.Allocations = append(hist.Allocations, allocationView(r))
	}
	if err := hist.Refuses(a); err != nil {
		return err
	}
	machines, err := st.Machines().List(ctx)
	if err != nil {
		return rpc.Errorf(rpc.CodeUnavailable, "read machines: %v", err)
	}
	for _, m := range machines {
		if m.Key != a.MachineID && m.Body.Subnet == a.Subnet {
			return rpc.Errorf(rpc.CodeConflict, "subnet: %s is Machine %s's (%s)", a.Subnet, m.Body.Name, m.Key).With("field", "subnet")
		}
	}
	return nil
}

// allocationRow is a's row: a new one stamped now, or the existing one
// with its state (and name, when given) moved on.
func allocationRow(rows []sdkstore.Row[store.AllocationBody], a rpc.Allocation, owner string) sdkstore.Row[store.AllocationBody] {
	now := time.Now().UnixMilli()
	i := slices.IndexFunc(rows, func(r sdkstore.Row[store.AllocationBody]) bool { return r.Key == a.MachineID })
	if i < 0 {
		return sdkstore.Row[store.AllocationBody]{Key: a.MachineID, Owner: owner, Body: store.AllocationBody{Subnet: a.Subnet,
			MachineName: a.MachineName, State: a.State, Operator: a.Operator, CreatedAt: now, UpdatedAt: now, Source: a.Source}}
	}
	row := rows[i]
	row.Owner, row.UpdatedAt = owner, 0
	row.Body.State, row.Body.UpdatedAt = a.State, now
	row.Body.MachineName = cmp.Or(a.MachineName, row.Body.MachineName)
	return row
}

func allocationView(r sdkstore.Row[store.AllocationBody]) rpc.Allocation {
	return rpc.Allocation{MachineID: r.Key, MachineName: r.Body.MachineName, Subnet: r.Body.Subnet, State: r.Body.State,
		Operator: r.Body.Operator, CreatedAt: r.Body.CreatedAt, UpdatedAt: r.Body.UpdatedAt, Source: r.Body.Source}
}

// listAllocations answers the whole allocation history, oldest first.
func (f *Feature) listAllocations(ctx context.Context, _ rpc.None) (rpc.Allocations, error) {
	st, err := f.host.Store()
	if err != nil {
		return rpc.Allocations{}, err
	}
	rows, err := store.Allocations(st).List(ctx)
	if err != nil {
		return rpc.Allocations{}, rpc.Errorf(rpc.CodeUnavailable, "read allocations: %v", err)
	}
	slices.SortFunc(rows, func(a, b sdkstore.Row[store.AllocationBody]) int {
		return cmp.Or(cmp.Compare(a.Body.CreatedAt, b.Body.CreatedAt), cmp.Compare(a.Key, b.Key))
	})
	out := rpc.Allocations{Allocations: []rpc.Allocation{}}
	for _, r := range rows {
		out.Allocations = append(out.Allocations, allocationView(r))
	}
	return out, nil
}

// markRemoval marks a namespace for removal; a namespace already marked
// keeps its first mark.
func (f *Feature) markRemoval(ctx context.Context, req rpc.MarkRemovalRequest) (rpc.RemovalMark, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.RemovalMark{}, err
	}
	ns := deploy.Namespace(req.Project, req.Environment)
	row, ok, err := store.Removals(st).Get(ctx, ns)
	if err != nil {
		return rpc.RemovalMark{}, rpc.Errorf(rpc.CodeUnavailable, "read removal mark of %s: %v", ns, err)
	}
	if !ok {
		row = sdkstore.Row[store.RemovalBody]{Key: ns, Owner: f.host.MachineID(), Body: store.RemovalBody{Project: req.Project,
			Environment: req.Environment, Operator: req.Operator, CreatedAt: time.Now().UnixMilli()}}
		if _, err := store.Removals(st).Put(ctx, row); err != nil {
			return rpc.RemovalMark{}, rpc.Errorf(rpc.CodeUnavailable, "write removal mark of %s: %v", ns, err)
		}
	}
	return removalView(row), nil
}

func removalView(r sdkstore.Row[store.RemovalBody]) rpc.RemovalMark {
	return rpc.RemovalMark{Project: r.Body.Project, Environment: r.Body.Environment, Operator: r.Body.Operator, CreatedAt: r.Body.CreatedAt}
}

// clearRemoval drops a namespace's mark (none: nothing to do).
func (f *Feature) clearRemoval(ctx context.Context, req rpc.ClearRemovalRequest) (struct{}, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return struct{}{}, err
	}
	ns := deploy.Namespace(req.Project, req.Environment)
	if _, err := store.Removals(st).Delete(ctx, ns); err != nil {
		return struct{}{}, rpc.Errorf(rpc.CodeUnavailable, "delete removal mark of %s: %v", ns, err)
	}
	return struct{}{}, nil
}

// listRemovals answers the pending removal marks by project and
// environment.
func (f *Feature) listRemovals(ctx context.Context, _ rpc.None) (rpc.RemovalMarks, error) {
	st, err := f.host.Store()
	if err != nil {
		return rpc.RemovalMarks{}, err
	}
	rows, err := store.Removals(st).List(ctx)
	if err != nil {
		return rpc.RemovalMarks{}, rpc.Errorf(rpc.CodeUnavailable, "read removal marks: %v", err)
	}
	out := rpc.RemovalMarks{Removals: []rpc.RemovalMark{}}
	for _, r := range rows {
		out.Removals = append(out.Removals, removalView(r))
	}
	slices.SortFunc(out.Removals, func(a, b rpc.RemovalMark) int {
		return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.Environment, b.Environment))
	})
	return out, nil
}
