package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

// RestoreReplicas is `ployz service restore-replicas`: while a Machine is
// Down, it redeploys every saved namespace's latest Saved State, so each
// replica a Down Machine served is replaced on the Machines that answer,
// start-first (the plan's retire rows take the Down Machine's Containers
// out of the Serving Pointer and leave them alone; that Machine stops
// them itself if it returns). It is what `ployz deploy` of each project
// does, without its compose files. With no Machine Down it changes
// nothing and says which Machines are merely unanswering. A namespace
// that failed returns a *PartialError.
func (s *Session) RestoreReplicas(ctx context.Context, r Reconcile) (ReconcileReport, error) {
	var list rpc.MachineList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListMachines, rpc.None{}, &list); err != nil {
		return ReconcileReport{}, err
	}
	down, other := membershipNames(list)
	if len(down) == 0 {
		msg := "no Machine is Down as " + list.ObserverName + "'s membership sees it: nothing to restore"
		if len(other) > 0 {
			msg += " (" + strings.Join(other, ", ") + "; replicas are replaced once membership declares a Machine Down)"
		}
		return ReconcileReport{}, errors.New(msg)
	}
	r.Why = "restore replicas of Down " + strings.Join(down, ", ")
	rep, err := s.Reconcile(ctx, r)
	rep.Machine = strings.Join(down, ", ")
	if err != nil {
		return rep, err
	}
	if failed := rep.Failed(); failed > 0 {
		return rep, partial(errors.New(partialReconcile(rep, failed)))
	}
	return rep, nil
}

// membershipNames are the Machines list's membership declares Down, and
// the others that are not up, as "name (state)".
func membershipNames(list rpc.MachineList) (down, other []string) {
	for _, m := range list.Machines {
		switch m.Membership {
		case deploy.MembershipDown:
			down = append(down, m.Name)
		case "up", "self":
		default:
			other = append(other, fmt.Sprintf("%s (%s)", m.Name, orUnknown(m.Membership)))
		}
	}
	return down, other
}
