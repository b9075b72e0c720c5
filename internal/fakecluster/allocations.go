package fakecluster

import (
	"cmp"
	"maps"
	"slices"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

// operatorMarks are the Cluster's allocation history and removal marks,
// shared by every Machine as the replicated tables are.
type operatorMarks struct {
	allocs   rpc.Allocations
	removals map[string]rpc.RemovalMark
	stamp    int64
}

// allocationRoutes answer put_allocation, list_allocations,
// mark_removal, clear_removal and list_removals with the entry's rules
// (rpc.Allocations.Refuses; the first mark of a namespace is kept).
func (fc *Cluster) allocationRoutes(srv *rpc.Server, m *Machine) {
	o := &fc.marks
	HandleMethod(fc, srv, m, rpc.PutAllocation, valid(func(req rpc.PutAllocationRequest) (rpc.Allocation, error) {
		if err := o.allocs.Refuses(req.Allocation); err != nil {
			return rpc.Allocation{}, err
		}
		return o.put(req.Allocation), nil
	}))
	HandleMethod(fc, srv, m, rpc.ListAllocations, func(rpc.None) (rpc.Allocations, error) {
		return rpc.Allocations{Allocations: slices.Clone(o.allocs.Allocations)}, nil
	})
	HandleMethod(fc, srv, m, rpc.MarkRemoval, valid(func(req rpc.MarkRemovalRequest) (rpc.RemovalMark, error) {
		ns := deploy.Namespace(req.Project, req.Environment)
		if _, ok := o.removals[ns]; !ok {
			o.stamp++
			req.CreatedAt = o.stamp
			o.removals[ns] = req.RemovalMark
		}
		return o.removals[ns], nil
	}))
	HandleMethod(fc, srv, m, rpc.ClearRemoval, valid(func(req rpc.ClearRemovalRequest) (struct{}, error) {
		delete(o.removals, deploy.Namespace(req.Project, req.Environment))
		return struct{}{}, nil
	}))
	HandleMethod(fc, srv, m, rpc.ListRemovals, func(rpc.None) (rpc.RemovalMarks, error) {
		out := rpc.RemovalMarks{Removals: []rpc.RemovalMark{}}
		for _, m := range o.removals {
			out.Removals = append(out.Removals, m)
		}
		slices.SortFunc(out.Removals, func(a, b rpc.RemovalMark) int {
			return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.Environment, b.Environment))
		})
		return out, nil
	})
}

// put records a, or moves its Machine's state, as the entry does.
func (o *operatorMarks) put(a rpc.Allocation) rpc.Allocation {
	o.stamp++
	i := slices.IndexFunc(o.allocs.Allocations, func(r rpc.Allocation) bool { return r.MachineID == a.MachineID })
	if i < 0 {
		a.CreatedAt, a.UpdatedAt = o.stamp, o.stamp
		o.allocs.Allocations = append(o.allocs.Allocations, a)
		return a
	}
	r := &o.allocs.Allocations[i]
	r.State, r.UpdatedAt, r.MachineName = a.State, o.stamp, cmp.Or(a.MachineName, r.MachineName)
	return *r
}

// Allocations is the Cluster's allocation history, oldest first.
func (fc *Cluster) Allocations() []rpc.Allocation {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return slices.Clone(fc.marks.allocs.Allocations)
}

// RemovalMarks are the Cluster's pending removal marks, by namespace.
func (fc *Cluster) RemovalMarks() map[string]rpc.RemovalMark {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return maps.Clone(fc.marks.removals)
}
