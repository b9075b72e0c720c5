package release

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Per-Machine outcomes of a rollout.
const (
	OutcomeUpgraded     = "upgraded"
	OutcomeCurrent      = "already_current" // the Machine already runs the version
	OutcomeRolledBack   = "rolled_back"     // a step failed; the Machine is back on its release
	OutcomeFailed       = "failed"          // failed, and not known to be back on its release
	OutcomeRefused      = "refused"         // the Machine cannot take this upgrade
	OutcomeNotAttempted = "not_attempted"   // an earlier Machine failed, so the rollout stopped
)

// Action is what the plan does on one Machine.
type Action struct {
	MachineID string `json:"machine_id"`
	Name      string `json:"name"`
	From      string `json:"from"`
	To        string `json:"to"`
	// Do is upgrade, ssh (upgrade over SSH: the Machine's release has no
	// upgrade route), skip (already on To) or refuse.
	Do     string `json:"do"`
	Reason string `json:"reason,omitempty"`
	// Missing is the capability the Machine lacks, when refused for one.
	Missing string `json:"missing_capability,omitempty"`
	// SSH is the connection URL an ssh action uses.
	SSH string `json:"ssh,omitempty"`
}

// OverSSH turns each action refused for lacking the upgrade route into an
// upgrade over SSH where urls (Machine id -> ssh URL) knows the Machine.
func OverSSH(plan []Action, urls map[string]string) {
	for i, a := range plan {
		if u, ok := urls[a.MachineID]; ok && a.Do == "refuse" && a.Missing == rpc.CapUpgradeMachine {
			plan[i].Do, plan[i].SSH = "ssh", u
			plan[i].Reason = fmt.Sprintf("release %s has no %s: over SSH (%s)", a.From, rpc.CapUpgradeMachine, u)
		}
	}
}

// Plan orders the upgrade of machines to m: the named ones (every one with
// all), one at a time in name order. A name that matches no Machine is an
// error; a Machine without the upgrade capability is refused with
// details.capability in its reason, since the swap needs the daemon's route.
func Plan(machines []rpc.MachineView, m *Manifest, names []string, all bool) ([]Action, error) {
	if !all && len(names) == 0 {
		return nil, fmt.Errorf("name the Machines to upgrade, or pass --all")
	}
	var picked []rpc.MachineView
	for _, n := range names {
		i := slices.IndexFunc(machines, func(v rpc.MachineView) bool { return v.Name == n || v.ID == n })
		if i < 0 {
			return nil, fmt.Errorf("machine %q: no such Machine in the observation", n)
		}
		if !slices.ContainsFunc(picked, func(v rpc.MachineView) bool { return v.ID == machines[i].ID }) {
			picked = append(picked, machines[i])
		}
	}
	if all {
		picked = slices.Clone(machines)
	}
	slices.SortStableFunc(picked, func(a, b rpc.MachineView) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	out := make([]Action, 0, len(picked))
	for _, v := range picked {
		a := Action{MachineID: v.ID, Name: v.Name, From: v.Version, To: m.Version, Do: "upgrade"}
		switch {
		case v.Version == m.Version:
			a.Do, a.Reason = "skip", "already runs "+m.Version
		case len(v.Capabilities) > 0 && !slices.Contains(v.Capabilities, rpc.CapUpgradeMachine):
			a.Do, a.Missing = "refuse", rpc.CapUpgradeMachine
			a.Reason = fmt.Sprintf("release %s has no %s, and the context names no ssh:// connection to this Machine", v.Version, rpc.CapUpgradeMachine)
		}
		out = append(out, a)
	}
	return out, nil
}

// MachineOutcome is what happened on one Machine.
type MachineOutcome struct {
	MachineID  string            `json:"machine_id"`
	Name       string            `json:"name"`
	From       string            `json:"from"`
	To         string            `json:"to"`
	Outcome    string            `json:"outcome"`
	FailedStep string            `json:"failed_step,omitempty"`
	Error      string            `json:"error,omitempty"`
	Steps      []rpc.UpgradeStep `json:"steps,omitempty"`
	Millis     int64             `json:"ms"`
}

// Outcome is a whole rollout, Machine by Machine (design bet 4).
type Outcome struct {
	Version  string           `json:"version"`
	Machines []MachineOutcome `json:"machines"`
	Millis   int64            `json:"ms"`
}

// Partial reports whether any Machine did not end on the version.
func (o Outcome) Partial() bool {
	return slices.ContainsFunc(o.Machines, func(m MachineOutcome) bool {
		return m.Outcome != OutcomeUpgraded && m.Outcome != OutcomeCurrent
	})
}

// UpgradeFunc upgrades one Machine and reports what its swap did; a
// rolled-back swap is an outcome, not an error.
type UpgradeFunc func(ctx context.Context, a Action) MachineOutcome

// Rollout runs plan one Machine at a time and stops after the first
// Machine that did not end upgraded: the rest are not attempted, so one bad
// release touches one Machine.
func Rollout(ctx context.Context, plan []Action, upgrade UpgradeFunc, progress func(MachineOutcome)) Outcome {
	start := time.Now()
	var o Outcome
	stopped := ""
	for _, a := range plan {
		o.Version = a.To
		mo := MachineOutcome{MachineID: a.MachineID, Name: a.Name, From: a.From, To: a.To}
		switch {
		case stopped != "":
			mo.Outcome, mo.Error = OutcomeNotAttempted, "the rollout stopped after "+stopped
		case ctx.Err() != nil:
			mo.Outcome, mo.Error = OutcomeNotAttempted, ctx.Err().Error()
		case a.Do == "skip":
			mo.Outcome = OutcomeCurrent
		case a.Do == "refuse":
			mo.Outcome, mo.Error = OutcomeRefused, a.Reason
		default:
			t := time.Now()
			mo = upgrade(ctx, a)
			mo.Millis = time.Since(t).Milliseconds()
			if mo.Outcome != OutcomeUpgraded {
				stopped = a.Name + " " + mo.Outcome
			}
		}
		o.Machines = append(o.Machines, mo)
		if progress != nil {
			progress(mo)
		}
	}
	o.Millis = time.Since(start).Milliseconds()
	return o
}
