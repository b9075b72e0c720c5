package client

import (
	"context"
	"fmt"

	"github.com/ployz/ployz/core/rpc"
)

// MachineRemoval is a planned removal of one Machine from the Cluster,
// for the caller to confirm before ApplyRemoveMachine: a Machine holding
// data (HoldsData) needs its name typed, never a plain yes.
type MachineRemoval struct {
	Machine rpc.Peer
	// HoldsData is set when the Machine holds Service Containers or
	// volumes, or could not be asked; Holds says what, for people.
	HoldsData bool
	Holds     string
}

// PlanRemoveMachine resolves ref (a name, id or id prefix) and asks the
// Machine what it holds. The Entry Machine of this Session cannot remove
// itself.
func (s *Session) PlanRemoveMachine(ctx context.Context, ref string) (*MachineRemoval, error) {
	var list rpc.MachineList
	if err := s.ent.Call(ctx, rpc.Target{}, rpc.CmdListMachines, nil, &list); err != nil {
		return nil, err
	}
	peers := make([]rpc.Peer, len(list.Machines))
	for i, m := range list.Machines {
		peers[i] = rpc.Peer{ID: m.ID, Name: m.Name}
	}
	p, err := rpc.Resolve(peers, ref)
	if err != nil {
		return nil, err
	}
	if p.ID == list.ObserverID {
		return nil, fmt.Errorf("machine %s is the Entry Machine of this connection; remove it through another Machine (--connect)", p.Name)
	}
	mr := &MachineRemoval{Machine: p}
	var held rpc.ContainerList
	lerr := s.ent.Call(ctx, rpc.Target{One: p.ID}, rpc.CmdListContainers, rpc.ListContainersRequest{}, &held)
	if lerr != nil || len(held.Volumes) > 0 || len(held.Containers) > 0 {
		mr.HoldsData = true
		mr.Holds = fmt.Sprintf("%d Service Containers and %d volumes", len(held.Containers), len(held.Volumes))
		if lerr != nil {
			mr.Holds = "data this computer could not list (" + lerr.Error() + ")"
		}
	}
	return mr, nil
}

// ApplyRemoveMachine resets the Machine (unless !reset) and makes the
// Cluster forget it. Reset goes first, so the Machine cannot publish its
// row again after the entry forgets it; an unreachable one is only
// forgotten, and that returns a *PartialError. wasReset says whether the
// reset happened.
func (s *Session) ApplyRemoveMachine(ctx context.Context, mr *MachineRemoval, reset bool) (wasReset bool, err error) {
	var resetErr error
	if reset {
		resetErr = s.ent.Call(ctx, rpc.Target{One: mr.Machine.ID}, rpc.CmdReset, nil, nil)
	}
	if err := s.ent.Call(ctx, rpc.Target{}, rpc.CmdForgetMachine, rpc.ForgetMachineRequest{ID: mr.Machine.ID}, nil); err != nil {
		return reset && resetErr == nil, err
	}
	if resetErr != nil {
		return false, partial(fmt.Errorf("removed from the Cluster, but resetting %s failed: %w (it keeps its old state until reset)", mr.Machine.Name, resetErr))
	}
	return reset, nil
}
