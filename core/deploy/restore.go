package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// OpRetire is a row on a Down Machine: its Container is left alone (no
// call reaches that Machine) and only leaves the Serving Pointer, so the
// Machine's own retire loop stops it if the Machine comes back. A plan
// writes one for each replica it replaces elsewhere.
const OpRetire = "retire"

// MembershipDown is the entry's membership verdict on a Machine its
// store's gossip declared dead (rpc.MachineView.Membership).
const MembershipDown = "down"

// Down reports whether the entry's membership declared the Machine Down
// and it did not answer this Snapshot: its Containers are unreachable,
// not merely unobserved.
func (m MachineState) Down() bool { return m.Membership == MembershipDown && !m.Observed }

// DownMachines are the Snapshot's Down Machines.
func (s Snapshot) DownMachines() []MachineState {
	var out []MachineState
	for _, m := range s.Machines {
		if m.Down() {
			out = append(out, m)
		}
	}
	return out
}

// ObserveServing reads every Service's Serving Pointer from the entry
// into snap.Serving when some Machine is Down: the pointer is what names
// the serving Containers a Down Machine holds (the Machine itself cannot
// list them). An entry that cannot answer leaves Serving nil and says
// why in ServingUnread; the plan then replaces nothing it cannot see.
func ObserveServing(ctx context.Context, c Caller, snap *Snapshot) {
	if len(snap.DownMachines()) == 0 {
		return
	}
	var st rpc.ServingStatus
	if err := rpc.InvokeInto(ctx, c, rpc.Target{}, rpc.ReadServingStatus, rpc.ServingStatusRequest{}, &st); err != nil {
		snap.ServingUnread = err.Error()
		return
	}
	snap.Serving = map[string][]rpc.ServingContainer{}
	for _, s := range st.Services {
		snap.Serving[s.Service] = s.Containers
	}
}

// LostReplicas are the Containers svc's Serving Pointer names on Down
// Machines, in pointer order (none unless ObserveServing read them).
func (s Snapshot) LostReplicas(ns, service string) []rpc.ServingContainer {
	var out []rpc.ServingContainer
	for _, c := range s.Serving[ingress.ServiceKey(ns, service)] {
		if m, ok := s.Machine(c.MachineID); ok && m.Down() {
			out = append(out, c)
		}
	}
	return out
}

// downWarnings say, once per plan, what happens to the Down Machines'
// Containers, or that the plan could not tell.
func downWarnings(snap Snapshot) []string {
	down := snap.DownMachines()
	if len(down) == 0 {
		return nil
	}
	if snap.Serving == nil && snap.ServingUnread != "" {
		return []string{fmt.Sprintf("%s Down, but the Serving Pointers could not be read (%s): its replicas are not replaced", names(down), snap.ServingUnread)}
	}
	return []string{fmt.Sprintf("%s Down: its Containers are left alone; each replica it served is replaced on the other Machines (retire rows), "+
		"and a returning Machine stops its replaced Containers itself; `ployz machine rm --force NAME` forgets a Machine that will not return", names(down))}
}

// retireRow takes a Down Machine's Container out of the Serving Pointer.
func (pl *placer) retireRow(c rpc.ServingContainer) Row {
	m := pl.machines[c.MachineID]
	return Row{MachineID: c.MachineID, Machine: m.Name, Service: pl.svc.Name, Op: OpRetire, OldID: c.ID, OldName: shortID(c.ID),
		Reason: fmt.Sprintf("%s is Down: left alone and replaced; it stops this Container itself if it returns", m.Name)}
}

// restoreReplicas labels the first creates of this plan as the
// replacements of the lost replicas and retires the lost replicas the
// Machines that answer now cover: all of them once the Service has its
// replicas there, else one per replacement.
func (pl *placer) restoreReplicas(live int) {
	n := 0
	for i := range pl.creates {
		if n == len(pl.lost) {
			break
		}
		c := pl.lost[n]
		pl.creates[i].Reason = fmt.Sprintf("replaces %s on Down %s (%s)", shortID(c.ID), pl.machines[c.MachineID].Name, pl.creates[i].Reason)
		n++
	}
	if live >= pl.svc.Replicas {
		n = len(pl.lost)
	}
	for _, c := range pl.lost[:n] {
		pl.retires = append(pl.retires, pl.retireRow(c))
	}
}

// volumeRestoreHint names, for a Service held because its Provisioned
// Volume's Writer was not observed, the Down Machines that may hold it
// and the `ployz volume restore` command that makes a Mirror the
// Writer. "" when no Machine is Down.
func volumeRestoreHint(svc Service, snap Snapshot) string {
	down := snap.DownMachines()
	if len(down) == 0 {
		return ""
	}
	var out []string
	for _, name := range svc.Provisioned {
		if _, err := provisionedWriter(name, snap); !errors.Is(err, errVolumeUnseen) {
			continue
		}
		from := "MIRROR"
		for _, m := range snap.Machines {
			if m.Observed && slices.Contains(m.Held, name) {
				from = m.Name
				break
			}
		}
		out = append(out, fmt.Sprintf("Provisioned Volume %s's Writer may be on Down %s: if it will not return, `ployz volume restore %s --from %s --force` makes a Mirror the Writer (`ployz volume ls %s` lists the copies), then deploy again",
			name, names(down), name, from, name))
	}
	return strings.Join(out, "; ")
}

// writerMaybeDown reports whether a Provisioned Volume svc mounts has no
// observed Writer while a Machine is Down: the plan then lists the
// volumes, to name a Mirror in its restore hint.
func writerMaybeDown(svc Service, snap Snapshot) bool {
	return len(svc.Provisioned) > 0 && volumeRestoreHint(svc, snap) != ""
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
