package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// ReconcileReport is what a drain, undrain or catch-up did: each saved
// namespace redeployed from its latest Saved State, and the Service
// Containers a drained Machine still holds.
type ReconcileReport struct {
	Machine    string            `json:"machine"`
	Namespaces []NamespaceResult `json:"namespaces"`
	// Remaining are the Containers still on a drained Machine, with why.
	Remaining []RemainingContainer `json:"remaining,omitempty"`
}

// Failed counts the namespaces whose redeploy failed.
func (r ReconcileReport) Failed() int {
	n := 0
	for _, ns := range r.Namespaces {
		if ns.Error != "" {
			n++
		}
	}
	return n
}

// NamespaceResult is one namespace's redeploy: its deploy result, or the
// error that stopped it (other namespaces go on).
type NamespaceResult struct {
	Namespace string        `json:"namespace"`
	Result    *DeployResult `json:"result,omitempty"`
	Error     string        `json:"error,omitempty"`
}

// RemainingContainer is a Service Container a drain could not move.
type RemainingContainer struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	Container string `json:"container"`
	Reason    string `json:"reason"`
}

// Reconcile redeploys saved namespaces one by one (see Session.Reconcile).
type Reconcile struct {
	// Why names the operation in each plan and Deploy record.
	Why string
	// Want picks the namespaces by their declarations (nil: every one).
	Want func(deploy.App) bool
	// Confirm sees each namespace's plan before it runs; an error skips
	// that namespace (it is reported). Nil runs every plan.
	Confirm func(*DeployPlan) error
	// Done hears each namespace's result as it ends.
	Done  func(NamespaceResult)
	Hooks Hooks
}

// Drain is a drain or undrain of one Machine.
type Drain struct {
	Machine string
	// Undrain makes the Machine eligible for placement again.
	Undrain bool
	// Marked hears the Machine once its label is set, before redeploys.
	Marked func(rpc.Inspection)
	// Confirm, Done and Hooks are as Reconcile's.
	Confirm func(*DeployPlan) error
	Done    func(NamespaceResult)
	Hooks   Hooks
}

// drain is Drain (client/history.go) before its history.
func (s *Session) drain(ctx context.Context, d Drain) (ReconcileReport, error) {
	in, err := s.markDrained(ctx, d.Machine, !d.Undrain)
	if err != nil {
		return ReconcileReport{}, fmt.Errorf("mark %s: %w", d.Machine, err)
	}
	if d.Marked != nil {
		d.Marked(in)
	}
	verb := "drain"
	if d.Undrain {
		verb = "undrain"
	}
	rep, err := s.Reconcile(ctx, Reconcile{Why: verb + " " + in.Name, Confirm: d.Confirm, Done: d.Done, Hooks: d.Hooks})
	rep.Machine = in.Name
	if err != nil {
		return rep, err
	}
	if !d.Undrain {
		if rep.Remaining, err = s.remainingOn(ctx, in.ID); err != nil {
			return rep, err
		}
	}
	if failed := rep.Failed(); failed > 0 || len(rep.Remaining) > 0 {
		return rep, partial(errors.New(partialReconcile(rep, failed)))
	}
	return rep, nil
}

// markDrained sets or clears the Machine's drained label.
func (s *Session) markDrained(ctx context.Context, machine string, drained bool) (rpc.Inspection, error) {
	req := rpc.UpdateMachineRequest{LabelsRemove: []string{deploy.LabelDrained}}
	if drained {
		req = rpc.UpdateMachineRequest{LabelsAdd: map[string]string{deploy.LabelDrained: time.Now().UTC().Format(time.RFC3339)}}
	}
	var in rpc.Inspection
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{One: machine}, rpc.UpdateMachine, req, &in)
	return in, err
}

func partialReconcile(rep ReconcileReport, failed int) string {
	s := fmt.Sprintf("%s: %d of %d namespace(s) failed to redeploy", rep.Machine, failed, len(rep.Namespaces))
	if len(rep.Remaining) > 0 {
		s += fmt.Sprintf("; %d Container(s) could not move", len(rep.Remaining))
	}
	return s
}

// Reconcile redeploys the latest Saved State of every namespace of the
// context that r.Want accepts, namespace by namespace; a failing
// namespace is reported and the others go on.
func (s *Session) Reconcile(ctx context.Context, r Reconcile) (ReconcileReport, error) {
	var rep ReconcileReport
	states, err := s.LatestSaved(ctx)
	if err != nil {
		return rep, err
	}
	var targets []operator.SavedState
	for _, st := range states {
		if r.Want != nil {
			app, err := loadDeclarations(ctx, st)
			if err != nil || !r.Want(app) {
				continue
			}
		}
		targets = append(targets, st)
	}
	for _, t := range targets {
		res := s.redeployOne(ctx, r, t)
		if r.Done != nil {
			r.Done(res)
		}
		rep.Namespaces = append(rep.Namespaces, res)
	}
	return rep, nil
}

// redeployOne plans, confirms and applies one namespace's Saved State.
func (s *Session) redeployOne(ctx context.Context, r Reconcile, t operator.SavedState) NamespaceResult {
	res := NamespaceResult{Namespace: deploy.Namespace(t.Project, t.Environment)}
	dp, err := s.PlanDeploy(ctx, DeployRequest{Compose: t.Compose, File: "compose.yaml", Project: t.Project, Environment: t.Environment,
		NoBuild: true, Why: r.Why})
	if err == nil && r.Confirm != nil {
		err = r.Confirm(dp)
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	out, err := s.ApplyDeploy(ctx, dp, r.Hooks)
	if err == nil || IsPartial(err) {
		res.Result = &out // it ran, completely or partly
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// remainingOn lists the Service Containers the Machine still holds, with
// the reason the plan gave for keeping each.
func (s *Session) remainingOn(ctx context.Context, machineID string) ([]RemainingContainer, error) {
	snap, err := deploy.Observe(ctx, s.ent, "", false)
	if err != nil {
		return nil, err
	}
	m, ok := snap.Machine(machineID)
	if !ok || !m.Observed {
		return nil, fmt.Errorf("machine %s was not observed after the drain; run `ployz ps` to see what it holds", machineID)
	}
	var out []RemainingContainer
	for _, co := range m.Containers {
		if !rpc.IsReplica(co.Labels) {
			continue // a hook or one-off run: the daemon removes it once it ended
		}
		why := "no other eligible Machine"
		if co.Spec != nil {
			for _, mt := range co.Spec.Mounts {
				if mt.Type == "volume" {
					why = "volume " + mt.Source + " is local to this Machine (volumes cannot move yet)"
				}
			}
		}
		out = append(out, RemainingContainer{Namespace: co.Namespace, Service: co.Service, Container: co.Name, Reason: why})
	}
	return out, nil
}

// GlobalCatchUp redeploys the saved namespaces that declare a Global
// Service, so a new Machine runs its Global slots at once; other
// namespaces are left alone. A namespace that failed returns a
// *PartialError naming it.
func (s *Session) GlobalCatchUp(ctx context.Context, machine string, r Reconcile) error {
	r.Why = "global catch-up for " + machine
	r.Want = func(app deploy.App) bool {
		for _, sv := range app.Services {
			if sv.Mode == deploy.ModeGlobal {
				return true
			}
		}
		return false
	}
	rep, err := s.Reconcile(ctx, r)
	if err != nil {
		return fmt.Errorf("global catch-up on %s: %w", machine, err)
	}
	for _, n := range rep.Namespaces {
		if n.Error != "" {
			return partial(fmt.Errorf("global catch-up on %s: %s: %s; `ployz deploy` of it retries", machine, n.Namespace, n.Error))
		}
	}
	return nil
}
