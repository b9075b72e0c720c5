package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/observe"
	"github.com/ployz/ployz/sdk/volume"
)

// Machines is the Machine list the Entry Machine observes, as it sent it.
func (s *Session) Machines(ctx context.Context) (rpc.MachineList, error) {
	var list rpc.MachineList
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListMachines, rpc.None{}, &list)
	return list, err
}

// InspectMachine is how the Machine ref names ("" is the Entry Machine)
// sees itself.
func (s *Session) InspectMachine(ctx context.Context, ref string) (rpc.Inspection, error) {
	var in rpc.Inspection
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{One: ref}, rpc.Inspect, rpc.None{}, &in)
	return in, err
}

// UpdateMachine changes the name and labels of the Machine ref names and
// returns it as it then sees itself.
func (s *Session) UpdateMachine(ctx context.Context, ref string, req rpc.UpdateMachineRequest) (rpc.Inspection, error) {
	var in rpc.Inspection
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{One: ref}, rpc.UpdateMachine, req, &in)
	return in, err
}

// Membership is the membership and round-trip times the Entry Machine's
// store sees.
func (s *Session) Membership(ctx context.Context) (rpc.Membership, error) {
	var ms rpc.Membership
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ReadMembership, rpc.None{}, &ms)
	return ms, err
}

// MachineLabels are the labels an operator asks a Machine to carry: plain
// key=value pairs and the labels with a meaning of their own. A nil
// pointer is a label not asked for. Errors name the input as the
// operator gives it (--accepts, --observe-budget, --zfs-pool).
type MachineLabels struct {
	Pairs   []string
	Accepts *[]string
	Budget  *string
	ZFSPool *string
}

// Labels validates the labels and returns them as a map (nil when none).
func (l MachineLabels) Labels() (map[string]string, error) {
	labels, err := operator.ParseLabels(l.Pairs)
	if err != nil {
		return nil, err
	}
	set := func(k, v string) {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = v
	}
	if l.Accepts != nil {
		v, err := rpc.ParseAccepts(*l.Accepts)
		if err != nil {
			return nil, fmt.Errorf("--accepts: %w", err)
		}
		set(rpc.MachineLabelAccepts, v)
	}
	if l.Budget != nil {
		if _, err := observe.ParseBudget(*l.Budget); err != nil {
			return nil, fmt.Errorf("--observe-budget: %w", err)
		}
		set(observe.BudgetLabel, strings.TrimSpace(*l.Budget))
	}
	if l.ZFSPool != nil {
		pool := strings.TrimSpace(*l.ZFSPool)
		if err := volume.ValidPool(pool); err != nil {
			return nil, fmt.Errorf("--zfs-pool: %w", err)
		}
		set(volume.PoolLabel, pool)
	}
	return labels, nil
}

// Accepts is a Machine's kinds of work as its labels say: "all" without
// the label, "none" for an empty one.
func Accepts(labels map[string]string) string {
	v, ok := labels[rpc.MachineLabelAccepts]
	switch {
	case !ok:
		return "all"
	case v == "":
		return "none"
	}
	return v
}
