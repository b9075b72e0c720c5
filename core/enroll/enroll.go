package enroll

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Allocations is where an enrollment chooses and records the subnets it
// gives Machines: the Cluster's allocation history (client), or an older
// release's local operator store (LocalAllocations).
type Allocations interface {
	// Allocate answers machineID's subnet: the one it was given before
	// (a retry resumes), else the lowest /24 of network that neither the
	// history nor observed uses, recorded before it is answered so it is
	// in the history before anything publishes or joins it.
	Allocate(ctx context.Context, machineID, machineName string, network netip.Prefix, observed []netip.Prefix) (netip.Prefix, error)
	// SetState records how the enrollment with this allocation stands:
	// joined, failed or removed.
	SetState(ctx context.Context, machineID, machineName string, subnet netip.Prefix, state string) error
}

// LocalAllocations keeps the allocation history of one context in this
// computer's operator store, as releases before the Cluster kept it did.
type LocalAllocations struct {
	Store   *operator.Store
	Context string
}

// Allocate is Allocations.Allocate in the local store.
func (l LocalAllocations) Allocate(_ context.Context, machineID, machineName string, network netip.Prefix, observed []netip.Prefix) (netip.Prefix, error) {
	return l.Store.Allocate(l.Context, machineID, machineName, network, observed)
}

// SetState is Allocations.SetState in the local store.
func (l LocalAllocations) SetState(_ context.Context, machineID, _ string, _ netip.Prefix, state string) error {
	return l.Store.SetAllocationState(l.Context, machineID, state)
}

// Options describes the Machine being enrolled.
type Options struct {
	Allocations Allocations
	Name        string            // Machine name; default the target's hostname
	Network     netip.Prefix      // Cluster network (init only)
	Endpoints   []string          // WireGuard endpoints; default what the target discovers
	Labels      map[string]string // placement labels
	Progress    Progress
}

func (o *Options) progress(f string, a ...any) {
	if o.Progress != nil {
		o.Progress(f, a...)
	}
}

// checkFresh refuses a target that already belongs to a Cluster. A target
// that is uninitialized or joining may be a retry: its row may already be
// published, and enrollment resumes with the same allocation.
func checkFresh(in rpc.Inspection, members []rpc.MachineView) error {
	if in.Phase == machine.Uninitialized || in.Phase == machine.Joining {
		return nil
	}
	if slices.ContainsFunc(members, func(m rpc.MachineView) bool { return m.ID == in.ID }) {
		return fmt.Errorf("machine %s (%s) is already a member of this Cluster (phase %s)", in.Name, in.ID, in.Phase)
	}
	return fmt.Errorf("machine %s (%s) is already %s in another Cluster; remove it there first (`ployz machine rm`)", in.Name, in.ID, in.Phase)
}

// Init founds a Cluster on target.
func Init(ctx context.Context, target *rpc.Client, o Options) (rpc.Inspection, error) {
	var in rpc.Inspection
	if err := rpc.InvokeInto(ctx, target, rpc.Target{}, rpc.Inspect, rpc.None{}, &in); err != nil {
		return in, fmt.Errorf("inspect target: %w", err)
	}
	if in.Phase != machine.Uninitialized {
		return in, fmt.Errorf("machine %s (%s) is already %s in a Cluster; `ployz machine rm` it from that Cluster to reuse it", in.Name, in.ID, in.Phase)
	}
	if o.Name == "" {
		o.Name = in.Hostname
	}
	if !o.Network.IsValid() {
		o.Network = netip.MustParsePrefix("10.210.0.0/16")
	}
	// Saved before the target publishes it (docs/architecture.md bet 6).
	subnet, err := o.Allocations.Allocate(ctx, in.ID, o.Name, o.Network, nil)
	if err != nil {
		return in, err
	}
	o.progress("initializing %s (%s) with subnet %s", o.Name, short(in.ID), subnet)
	req := rpc.InitializeRequest{Name: o.Name, Network: o.Network.String(), Subnet: subnet.String(), Endpoints: o.Endpoints, Labels: o.Labels}
	var out rpc.Inspection
	if err := rpc.InvokeInto(ctx, target, rpc.Target{}, rpc.Initialize, req, &out); err != nil {
		o.Allocations.SetState(ctx, in.ID, o.Name, subnet, "failed") // the call's error is the one to report
		return out, fmt.Errorf("initialize %s: %w", o.Name, err)
	}
	o.Allocations.SetState(ctx, in.ID, o.Name, subnet, "joined") // bookkeeping only
	return out, nil
}

// Add enrolls target into the Cluster that entry belongs to: the entry
// publishes the joiner's row (so existing Machines add it to the mesh),
// then the joiner joins with the entry's peers and store version vector.
func Add(ctx context.Context, entry, target *rpc.Client, o Options) (rpc.Inspection, error) {
	var in rpc.Inspection
	if err := rpc.InvokeInto(ctx, target, rpc.Target{}, rpc.Inspect, rpc.None{}, &in); err != nil {
		return in, fmt.Errorf("inspect target: %w", err)
	}
	var list rpc.MachineList
	if err := rpc.InvokeInto(ctx, entry, rpc.Target{}, rpc.ListMachines, rpc.None{}, &list); err != nil {
		return in, fmt.Errorf("list machines on the entry: %w", err)
	}
	if err := checkFresh(in, list.Machines); err != nil {
		return in, err
	}
	var entryIn rpc.Inspection
	if err := rpc.InvokeInto(ctx, entry, rpc.Target{}, rpc.Inspect, rpc.None{}, &entryIn); err != nil {
		return in, fmt.Errorf("inspect entry: %w", err)
	}
	network, err := netip.ParsePrefix(entryIn.Network)
	if err != nil {
		return in, fmt.Errorf("entry %s reports no Cluster network (%q)", entryIn.Name, entryIn.Network)
	}
	if o.Name == "" {
		o.Name = in.Hostname
	}
	var observed []netip.Prefix
	var peers []machine.Peer
	for _, m := range list.Machines {
		s, err := netip.ParsePrefix(m.Subnet)
		if err != nil {
			continue
		}
		observed = append(observed, s)
		p := machine.Peer{ID: m.ID, Name: m.Name, PublicKey: m.PublicKey, Subnet: s}
		for _, e := range m.Endpoints {
			if ap, err := netip.ParseAddrPort(e); err == nil {
				p.Endpoints = append(p.Endpoints, ap)
			}
		}
		if m.Name == o.Name {
			o.progress("warning: a Machine named %s already exists (%s); both keep the name (Name Ambiguity is allowed)", o.Name, short(m.ID))
		}
		peers = append(peers, p)
	}
	subnet, err := o.Allocations.Allocate(ctx, in.ID, o.Name, network, observed)
	if err != nil {
		return in, err
	}
	endpoints := o.Endpoints
	if len(endpoints) == 0 {
		endpoints = in.Endpoints
	}
	o.progress("publishing %s (%s) with subnet %s through %s", o.Name, short(in.ID), subnet, entryIn.Name)
	// The entry's pins and its endorsement of the joiner
	// (core/machine/trust) are forwarded as they are.
	var pub rpc.MachinePublished
	if err := rpc.InvokeInto(ctx, entry, rpc.Target{}, rpc.PublishMachine, rpc.PublishMachineRequest{
		ID: in.ID, Name: o.Name, PublicKey: in.PublicKey, Subnet: subnet.String(), Endpoints: endpoints, RPCKey: in.RPCKey}, &pub); err != nil {
		return in, fmt.Errorf("publish %s: %w", o.Name, err)
	}
	o.progress("joining %s to %d Machines; waiting for its store to catch up", o.Name, len(peers))
	var out rpc.Inspection
	err = rpc.InvokeInto(ctx, target, rpc.Target{}, rpc.Join, rpc.JoinRequest{
		Name: o.Name, Network: network.String(), Subnet: subnet.String(), Endpoints: endpoints, Labels: o.Labels,
		Peers: peers, TargetVersions: pub.StoreVersions, ClusterSecret: pub.ClusterSecret,
		TrustedMachines: pub.TrustedMachines, Endorsement: pub.Endorsement}, &out)
	if err != nil {
		o.Allocations.SetState(ctx, in.ID, o.Name, subnet, "failed") // the call's error is the one to report
		return out, fmt.Errorf("join %s: %w", o.Name, err)
	}
	if out.Phase != machine.Participating {
		return out, fmt.Errorf("machine %s is still %s: its store has not caught up yet; run `ployz machine add` again to keep waiting", o.Name, out.Phase)
	}
	o.Allocations.SetState(ctx, in.ID, o.Name, subnet, "joined") // bookkeeping only
	return out, nil
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
