package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
)

// RowsPlan is a hand-made plan (start, stop) over the Containers a
// snapshot shows, for the caller to show and confirm before ApplyRows.
type RowsPlan struct {
	Plan     deploy.Plan
	Snapshot deploy.Snapshot
}

// RowsResult is `ployz start|stop --json`.
type RowsResult struct {
	Outcome    deploy.Outcome      `json:"outcome"`
	Plan       deploy.Plan         `json:"plan"`
	Unobserved []deploy.Unobserved `json:"unobserved"`
}

// PlanStartStop plans starting ("start") or stopping ("stop") service's
// existing Containers in ns. It does not change the Saved State: the next
// Deploy starts stopped up-to-date Containers again (scale to 0 keeps
// them stopped).
func (s *Session) PlanStartStop(ctx context.Context, ns, service, verb string) (*RowsPlan, error) {
	if verb != "start" && verb != "stop" {
		return nil, fmt.Errorf("verb %q: want start or stop", verb)
	}
	snap, cs, err := s.ServiceContainers(ctx, ns, service)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, NoService(service, ns, snap)
	}
	plan := deploy.Plan{Namespace: ns, DeploymentID: "(" + verb + ")"}
	for _, co := range cs {
		r := deploy.Row{MachineID: co.MachineID, Machine: views.MachineName(snap, co.MachineID), Service: co.Service, OldID: co.ID, OldName: co.Name}
		switch {
		case verb == "stop" && deploy.Running(co):
			r.Op, r.Reason = deploy.OpStop, "requested stop"
		case verb == "start" && co.State != "running":
			r.Op, r.Reason = deploy.OpStart, "requested start"
		default:
			r.Op, r.Reason = deploy.OpUnchanged, "already "+co.State
		}
		plan.Rows = append(plan.Rows, r)
	}
	return &RowsPlan{Plan: plan, Snapshot: snap}, nil
}

// ApplyRows runs a RowsPlan; a partial outcome, or Machines the snapshot
// did not observe (their Containers untouched), returns a *PartialError.
func (s *Session) ApplyRows(ctx context.Context, rp *RowsPlan, h Hooks) (RowsResult, error) {
	res := RowsResult{Plan: rp.Plan, Unobserved: rp.Snapshot.Missing}
	ctx, release, err := s.Hold(ctx, NamespaceScope(rp.Plan.Namespace), strings.Trim(rp.Plan.DeploymentID, "()"), h.warn)
	if err != nil {
		return res, err
	}
	defer release()
	if rp.Plan.Changes() > 0 {
		res.Outcome = (&deploy.Executor{C: s.ent, Progress: h.step, ReadyTimeout: DefaultReadyTimeout}).Run(ctx, rp.Plan)
	} else {
		res.Outcome.Status = "completed"
	}
	switch out := res.Outcome; {
	case out.Partial():
		return res, partial(fmt.Errorf("%s: %d step(s) failed, %d never attempted", out.Status, out.Count(deploy.StepFailed), out.Count(deploy.StepNeverAttempted)))
	case !rp.Snapshot.Complete():
		return res, partial(fmt.Errorf("Machines not observed, their Containers untouched: %s", rp.Snapshot.MissingNames()))
	}
	return res, nil
}

// ServiceContainers observes ns and returns the Service's replicas
// (hooks and one-off runs excluded).
func (s *Session) ServiceContainers(ctx context.Context, ns, service string) (deploy.Snapshot, []rpc.ContainerObservation, error) {
	snap, err := deploy.Observe(ctx, s.ent, ns, false)
	if err != nil {
		return snap, nil, err
	}
	return snap, ServiceOf(snap, ns, service), nil
}

// ServiceOf is a Service's replicas in a snapshot (hooks and one-off runs
// excluded).
func ServiceOf(snap deploy.Snapshot, ns, service string) []rpc.ContainerObservation {
	var out []rpc.ContainerObservation
	for _, co := range snap.Containers(ns) {
		if co.Service == service && rpc.IsReplica(co.Labels) {
			out = append(out, co)
		}
	}
	return out
}

// NoServiceError is a Service with no Container where it was looked
// for; Unobserved names the Machines not observed (it may be there).
type NoServiceError struct {
	Service, Namespace, Unobserved string
}

func (e *NoServiceError) Error() string {
	if e.Unobserved != "" {
		return fmt.Sprintf("service %q: no Container found in %s on the observed Machines; not observed: %s", e.Service, e.Namespace, e.Unobserved)
	}
	return fmt.Sprintf("service %q: no Container found in %s", e.Service, e.Namespace)
}

// NoService is the *NoServiceError of a snapshot of ns.
func NoService(service, ns string, snap deploy.Snapshot) error {
	e := &NoServiceError{Service: service, Namespace: ns}
	if !snap.Complete() {
		e.Unobserved = snap.MissingNames()
	}
	return e
}
