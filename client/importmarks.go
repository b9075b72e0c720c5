package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// importMarks imports the allocation history and the removal marks this
// computer kept, once (a marker of their own: a store an earlier release
// imported still holds them); what the Cluster holds already is left as
// it is. ran is false when an earlier import did it, or the entry keeps
// none (asked again next time).
func (s *Session) importMarks(ctx context.Context, rep *ImportReport) (ran bool, err error) {
	if done, err := s.st.PartImportedToCluster(operator.ImportMarks, s.name); err != nil || done {
		return false, err
	}
	err = s.importAllocations(ctx, rep)
	if err == nil {
		err = s.importRemovals(ctx, rep)
	}
	switch {
	case Unsupported(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, s.st.MarkPartImportedToCluster(operator.ImportMarks, s.name, time.Now())
}

// importAllocations records every local allocation whose Machine the
// Cluster's history lacks. One the entry refuses as taken (its subnet
// is another Machine's there) is already kept from being given again:
// it is skipped.
func (s *Session) importAllocations(ctx context.Context, rep *ImportReport) error {
	local, err := s.st.Allocations(s.name)
	if err != nil {
		return err
	}
	var have rpc.Allocations
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListAllocations, rpc.None{}, &have); err != nil {
		return fmt.Errorf("import allocations: %w", err)
	}
	op := s.Operator().History()
	for _, a := range local {
		if slices.ContainsFunc(have.Allocations, func(h rpc.Allocation) bool { return h.MachineID == a.MachineID }) {
			continue
		}
		err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.PutAllocation, rpc.PutAllocationRequest{Allocation: rpc.Allocation{MachineID: a.MachineID,
			MachineName: a.MachineName, Subnet: a.Subnet.String(), State: a.State, Operator: op, Source: "import:" + s.name}}, nil)
		var e *rpc.Error
		switch {
		case errors.As(err, &e) && e.Code == rpc.CodeConflict:
			continue
		case err != nil:
			return fmt.Errorf("import the allocation of %s to %s: %w", a.Subnet, a.MachineName, err)
		}
		rep.Allocations++
	}
	return nil
}

// importRemovals marks in the Cluster every namespace this computer
// kept a pending removal of that the Cluster does not mark.
func (s *Session) importRemovals(ctx context.Context, rep *ImportReport) error {
	local, err := s.st.Removals(s.name)
	if err != nil {
		return err
	}
	var have rpc.RemovalMarks
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListRemovals, rpc.None{}, &have); err != nil {
		return fmt.Errorf("import removal marks: %w", err)
	}
	there := map[string]bool{}
	for _, m := range have.Removals {
		there[deploy.Namespace(m.Project, m.Environment)] = true
	}
	for _, m := range local {
		if there[deploy.Namespace(m.Project, m.Environment)] {
			continue
		}
		if err := s.markRemoval(ctx, m.Project, m.Environment); err != nil {
			return fmt.Errorf("import removal mark: %w", err)
		}
		rep.Removals++
	}
	return nil
}
