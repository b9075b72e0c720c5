package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ployz/ployz/core/enroll"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// The allocation history lives in the Cluster (allocations, through the
// entry): an enrollment, holding the "enroll" lease, chooses a subnet
// that neither the history nor a published Machine uses and records it
// there before it publishes the Machine, so two operators adding
// Machines never collide, even when one crashed between allocating and
// publishing. Against an entry that keeps no history (an older release)
// this computer's operator store keeps it, as before.

// maxAllocationTries bounds how often Allocate moves on past a subnet
// the entry refuses as taken (a Machine the listing missed).
const maxAllocationTries = 8

// clusterAllocations is enroll.Allocations through an entry, falling
// back to local when the entry answers unsupported.
type clusterAllocations struct {
	ent   *rpc.Client
	op    store.HistoryOperator
	local enroll.LocalAllocations
	// founding is set while Init founds the Cluster: there is no history
	// to read or write until the target is initialized, so Allocate only
	// chooses and SetState records the allocation.
	founding bool
	// fallback is set once the entry answered unsupported.
	fallback bool
}

// allocations is the Session's enroll.Allocations.
func (s *Session) allocations() *clusterAllocations {
	return &clusterAllocations{ent: s.ent, op: s.Operator().History(), local: enroll.LocalAllocations{Store: s.st, Context: s.name}}
}

// Allocate is enroll.Allocations.Allocate in the Cluster.
func (a *clusterAllocations) Allocate(ctx context.Context, machineID, machineName string, network netip.Prefix, observed []netip.Prefix) (netip.Prefix, error) {
	if a.founding {
		return meshaddr.NextFreeSubnetIn(network, observed)
	}
	hist, err := a.list(ctx)
	switch {
	case err != nil:
		return netip.Prefix{}, err
	case a.fallback:
		return a.local.Allocate(ctx, machineID, machineName, network, observed)
	}
	used := slices.Clone(observed)
	for _, h := range hist {
		s, err := netip.ParsePrefix(h.Subnet)
		if err != nil {
			continue // an unreadable row cannot be chosen again either
		}
		if h.MachineID == machineID {
			return s, nil
		}
		used = append(used, s)
	}
	return a.record(ctx, machineID, machineName, network, used)
}

// record writes the lowest free subnet as machineID's allocation; one
// the entry refuses as taken is added to used and the next one tried.
func (a *clusterAllocations) record(ctx context.Context, machineID, machineName string, network netip.Prefix, used []netip.Prefix) (netip.Prefix, error) {
	for range maxAllocationTries {
		subnet, err := meshaddr.NextFreeSubnetIn(network, used)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("allocate a subnet for %s: %w", machineName, err)
		}
		err = a.put(ctx, machineID, machineName, subnet, "allocated")
		var e *rpc.Error
		if errors.As(err, &e) && e.Code == rpc.CodeConflict {
			used = append(used, subnet)
			continue
		}
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("record the allocation of %s to %s in the Cluster: %w", subnet, machineName, err)
		}
		return subnet, nil
	}
	return netip.Prefix{}, fmt.Errorf("allocate a subnet for %s: the entry refused %d subnets as taken", machineName, maxAllocationTries)
}

// SetState is enroll.Allocations.SetState in the Cluster (founding: the
// allocation's first record there).
func (a *clusterAllocations) SetState(ctx context.Context, machineID, machineName string, subnet netip.Prefix, state string) error {
	if !a.fallback {
		err := a.put(ctx, machineID, machineName, subnet, state)
		if !Unsupported(err) {
			return err
		}
		a.fallback = true
	}
	if a.founding {
		// An older release founded the Cluster: keep the history here.
		// Allocating within the subnet itself records exactly it.
		if _, err := a.local.Allocate(ctx, machineID, machineName, subnet, nil); err != nil {
			return err
		}
	}
	return a.local.SetState(ctx, machineID, machineName, subnet, state)
}

func (a *clusterAllocations) put(ctx context.Context, machineID, machineName string, subnet netip.Prefix, state string) error {
	return rpc.InvokeInto(ctx, a.ent, rpc.Target{}, rpc.PutAllocation, rpc.PutAllocationRequest{Allocation: rpc.Allocation{MachineID: machineID,
		MachineName: machineName, Subnet: subnet.String(), State: state, Operator: a.op}}, nil)
}

// list is the Cluster's allocation history; an entry that keeps none
// sets fallback.
func (a *clusterAllocations) list(ctx context.Context) ([]rpc.Allocation, error) {
	var out rpc.Allocations
	err := rpc.InvokeInto(ctx, a.ent, rpc.Target{}, rpc.ListAllocations, rpc.None{}, &out)
	if Unsupported(err) {
		a.fallback = true
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("allocation history: %w", err)
	}
	return out.Allocations, nil
}

// Allocations is the Cluster's allocation history, oldest first (this
// computer's, against an older entry).
func (s *Session) Allocations(ctx context.Context) ([]rpc.Allocation, error) {
	a := s.allocations()
	hist, err := a.list(ctx)
	if err != nil || !a.fallback {
		return hist, err
	}
	local, err := s.st.Allocations(s.name)
	if err != nil {
		return nil, err
	}
	out := make([]rpc.Allocation, 0, len(local))
	for _, l := range local {
		out = append(out, rpc.Allocation{MachineID: l.MachineID, MachineName: l.MachineName, Subnet: l.Subnet.String(), State: l.State})
	}
	return out, nil
}
