package client

import (
	"context"
	"fmt"
	"net/netip"
	"time"

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
	// Lost is set by PlanForgetMachine (`machine rm --force`): the
	// Machine did not answer, Silence says how it was asked; it is
	// forgotten without a reset.
	Lost    bool
	Silence string
	// Last is set by PlanResetMachine for the Cluster's only Machine,
	// which is also the Entry Machine: it resets itself and the Cluster
	// ends (no other Machine is left to forget it).
	Last bool
	// Subnet is the Machine's, recorded as removed in the allocation
	// history (never given again).
	Subnet string
}

// Question is what the caller asks before ApplyRemoveMachine; typed
// says the answer must be the Machine's name (it holds data, and a plain
// yes never covers that), else it is yes or no.
func (mr *MachineRemoval) Question() (question string, typed bool) {
	p := mr.Machine
	switch {
	case mr.HoldsData:
		return fmt.Sprintf("Machine %s holds %s. Type its name to remove it: ", p.Name, mr.Holds), true
	case mr.Lost:
		return fmt.Sprintf("Machine %s (%s) does not answer (%s). Forget it for good, without a reset?", p.Name, shortID(p.ID, 8), mr.Silence), false
	case mr.Last:
		return fmt.Sprintf("Machine %s (%s) is the Cluster's only Machine: resetting it ends the Cluster. Continue?", p.Name, shortID(p.ID, 8)), false
	}
	return fmt.Sprintf("Remove machine %s (%s) from the Cluster and reset it?", p.Name, shortID(p.ID, 8)), false
}

// Removed is the line that reports the removal done.
func (mr *MachineRemoval) Removed() string {
	return fmt.Sprintf("removed %s (%s) from the Cluster", mr.Machine.Name, shortID(mr.Machine.ID, 8))
}

// shortID is id's first n characters: a Machine's 8, a Container's 12.
func shortID(id string, n int) string {
	if len(id) > n {
		return id[:n]
	}
	return id
}

// PlanRemoveMachine resolves ref (a name, id or id prefix) and asks the
// Machine what it holds. The Entry Machine of this Session cannot remove
// itself.
func (s *Session) PlanRemoveMachine(ctx context.Context, ref string) (*MachineRemoval, error) {
	_, mv, err := s.resolveRemoval(ctx, ref)
	if err != nil {
		return nil, err
	}
	mr := &MachineRemoval{Machine: rpc.Peer{ID: mv.ID, Name: mv.Name}, Subnet: mv.Subnet}
	s.askHolds(ctx, mr, rpc.Target{One: mv.ID})
	return mr, nil
}

// askHolds asks the Machine at t what it holds, for mr's question.
func (s *Session) askHolds(ctx context.Context, mr *MachineRemoval, t rpc.Target) {
	var held rpc.ContainerList
	lerr := rpc.InvokeInto(ctx, s.ent, t, rpc.ListContainers, rpc.ListContainersRequest{}, &held)
	if lerr != nil || len(held.Volumes) > 0 || len(held.Containers) > 0 {
		mr.HoldsData = true
		mr.Holds = fmt.Sprintf("%d Service Containers and %d volumes", len(held.Containers), len(held.Volumes))
		if lerr != nil {
			mr.Holds = "data this computer could not list (" + lerr.Error() + ")"
		}
	}
}

// ApplyRemoveMachine resets the Machine (unless !reset) and makes the
// Cluster forget it. Reset goes first, so the Machine cannot publish its
// row again after the entry forgets it; an unreachable one is only
// forgotten, and that returns a *PartialError. wasReset says whether the
// reset happened.
func (s *Session) ApplyRemoveMachine(ctx context.Context, mr *MachineRemoval, reset bool) (wasReset bool, err error) {
	if mr.Last {
		// The only Machine is the entry: it resets itself, and no other
		// Machine is left to forget it.
		if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.Reset, rpc.None{}, nil); err != nil {
			return false, fmt.Errorf("reset %s: %w", mr.Machine.Name, err)
		}
		return true, nil
	}
	var resetErr error
	reset = reset && !mr.Lost
	if reset {
		resetErr = rpc.InvokeInto(ctx, s.ent, rpc.Target{One: mr.Machine.ID}, rpc.Reset, rpc.None{}, nil)
	}
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ForgetMachine, rpc.ForgetMachineRequest{ID: mr.Machine.ID}, nil); err != nil {
		return reset && resetErr == nil, err
	}
	// The subnet stays in the allocation history, so it is never given to
	// another Machine; the state records why it is no longer joined.
	if subnet, err := netip.ParsePrefix(mr.Subnet); err == nil {
		s.allocations().SetState(ctx, mr.Machine.ID, mr.Machine.Name, subnet, "removed") // bookkeeping only
	}
	if resetErr != nil {
		return false, partial(fmt.Errorf("removed from the Cluster, but resetting %s failed: %w (it keeps its old state until reset)", mr.Machine.Name, resetErr))
	}
	return reset, nil
}

// resolveRemoval resolves ref among the Machines the entry lists,
// refusing the entry itself.
func (s *Session) resolveRemoval(ctx context.Context, ref string) (rpc.MachineList, rpc.MachineView, error) {
	var list rpc.MachineList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListMachines, rpc.None{}, &list); err != nil {
		return list, rpc.MachineView{}, err
	}
	peers := make([]rpc.Peer, len(list.Machines))
	for i, m := range list.Machines {
		peers[i] = rpc.Peer{ID: m.ID, Name: m.Name}
	}
	p, err := rpc.Resolve(peers, ref)
	if err != nil {
		return list, rpc.MachineView{}, err
	}
	if p.ID == list.ObserverID {
		return list, rpc.MachineView{}, fmt.Errorf("machine %s is the Entry Machine of this connection; remove it through another Machine (--connect)", p.Name)
	}
	for _, m := range list.Machines {
		if m.ID == p.ID {
			return list, m, nil
		}
	}
	return list, rpc.MachineView{ID: p.ID, Name: p.Name}, nil
}

// lostProbeTimeout bounds the call that checks a Machine no longer
// answers before `machine rm --force` forgets it.
const lostProbeTimeout = 5 * time.Second

// PlanForgetMachine plans `ployz machine rm --force`: the Cluster forgets
// a Machine that will never return (its rows, so every Machine drops it
// as a peer; its subnet stays reserved in the allocation history), with
// no reset, since nothing reaches it. It is refused while the Machine
// answers, naming how: its daemon answered a call through the entry, or
// the entry's store membership sees it up. Such a Machine is removed
// with a reset (PlanRemoveMachine).
func (s *Session) PlanForgetMachine(ctx context.Context, ref string) (*MachineRemoval, error) {
	list, mv, err := s.resolveRemoval(ctx, ref)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, lostProbeTimeout)
	defer cancel()
	var in rpc.Inspection
	callErr := rpc.InvokeInto(pctx, s.ent, rpc.Target{One: mv.ID}, rpc.Inspect, rpc.None{}, &in)
	refuse := func(how string) error {
		return fmt.Errorf("machine %s answers (%s): --force is for a Machine that will never return; `ployz machine rm %s` removes and resets one that answers",
			mv.Name, how, mv.Name)
	}
	switch {
	case callErr == nil:
		return nil, refuse(fmt.Sprintf("its daemon answered inspect through %s: phase %s, version %s", list.ObserverName, in.Phase, in.DaemonVersion))
	case mv.Membership == "up":
		return nil, refuse(fmt.Sprintf("the store membership of %s sees it up: it answers gossip probes", list.ObserverName))
	}
	return &MachineRemoval{Machine: rpc.Peer{ID: mv.ID, Name: mv.Name}, Subnet: mv.Subnet, Lost: true,
		Silence: fmt.Sprintf("inspect through %s: %v; store membership: %s", list.ObserverName, callErr, orUnknown(mv.Membership))}, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// MachineTarget is every Machine, or the one machine names (a
// --machine flag: name or id).
func MachineTarget(machine string) rpc.Target {
	if machine != "" {
		return rpc.Target{Set: []string{machine}}
	}
	return rpc.Target{All: true}
}
