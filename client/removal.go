package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/views"
)

// RemovalReport is how one pending project removal stands.
type RemovalReport struct {
	Project     string `json:"project"`
	Environment string `json:"environment"`
	// Status is done (nothing of it runs on any Machine, all observed) or
	// stalled (something could not be reached or removed; Reason says what).
	Status  string `json:"status"`
	Removed int    `json:"removed"`
	Reason  string `json:"reason,omitempty"`
}

// Namespace is the removed project's namespace.
func (r RemovalReport) Namespace() string { return deploy.Namespace(r.Project, r.Environment) }

// ProjectRemoval is `ployz project rm --json`.
type ProjectRemoval struct {
	Removals   []RemovalReport     `json:"removals"`
	Unobserved []deploy.Unobserved `json:"unobserved"`
}

// removeProject is RemoveProject (client/history.go) before its history.
func (s *Session) removeProject(ctx context.Context, project, env string, h Hooks) (ProjectRemoval, error) {
	ns := deploy.Namespace(project, env)
	ctx, release, err := s.Hold(ctx, NamespaceScope(ns), "project rm", h.warn)
	if err != nil {
		return ProjectRemoval{}, err
	}
	defer release()
	if err := s.markRemoval(ctx, project, env); err != nil {
		return ProjectRemoval{}, err
	}
	snap, err := deploy.Observe(ctx, s.ent, "", false)
	if err != nil {
		return ProjectRemoval{}, fmt.Errorf("removal of %s is marked but stalled: %w", ns, err)
	}
	out := ProjectRemoval{Removals: s.finishRemovals(ctx, snap, "", h), Unobserved: snap.Missing}
	for _, r := range out.Removals {
		if r.Status != "done" {
			return out, partial(fmt.Errorf("removal of %s-%s is stalled: %s", r.Project, r.Environment, r.Reason))
		}
	}
	return out, nil
}

// finishRemovals tries every pending removal mark of the context against
// snap (which must hold all namespaces) but skipNS: it removes what it can
// reach and clears a mark only when a complete snapshot shows nothing
// left. Marks are never retried on a timer; each operation that meets
// them tries again.
func (s *Session) finishRemovals(ctx context.Context, snap deploy.Snapshot, skipNS string, h Hooks) []RemovalReport {
	marks, err := s.Removals(ctx)
	if err != nil {
		h.warn(fmt.Errorf("removal marks: %w", err))
		return nil
	}
	var out []RemovalReport
	for _, m := range marks {
		ns := deploy.Namespace(m.Project, m.Environment)
		if ns == skipNS {
			continue
		}
		rep := s.removeNamespace(ctx, snap, m.Project, m.Environment, h)
		h.removal(rep)
		out = append(out, rep)
	}
	return out
}

// removeNamespace removes every Container of one marked namespace snap
// shows, and records the removal when nothing is left.
func (s *Session) removeNamespace(ctx context.Context, snap deploy.Snapshot, project, env string, h Hooks) RemovalReport {
	ns := deploy.Namespace(project, env)
	rep := RemovalReport{Project: project, Environment: env}
	plan := deploy.Plan{Namespace: ns, DeploymentID: "(removal)"}
	for _, co := range snap.Containers(ns) {
		plan.Rows = append(plan.Rows, deploy.Row{MachineID: co.MachineID, Machine: views.MachineName(snap, co.MachineID), Service: co.Service,
			Op: deploy.OpRemove, Reason: "project removal", OldID: co.ID, OldName: co.Name})
	}
	o := (&deploy.Executor{C: s.ent, Progress: h.step}).Run(ctx, plan)
	rep.Removed = len(plan.Rows) - o.FailedRows()
	var reasons []string
	// The namespace's scheduled jobs go too: no Machine starts their runs.
	if err := s.storeJobs(ctx, deploy.Plan{Namespace: ns}, nil, true); err != nil {
		reasons = append(reasons, err.Error())
	}
	// And its volume policies: the volumes stay, unprotected.
	if err := s.storeVolumePolicies(ctx, ns, "", nil, true); err != nil {
		reasons = append(reasons, err.Error())
	}
	if !snap.Complete() {
		reasons = append(reasons, "Machines not observed: "+snap.MissingNames())
	}
	for _, st := range o.Steps {
		if st.Status == deploy.StepFailed {
			reasons = append(reasons, fmt.Sprintf("%s %s on %s: %s", st.Action, st.Container, st.Machine, st.Error))
		}
	}
	if len(reasons) > 0 {
		rep.Status, rep.Reason = "stalled", strings.Join(reasons, "; ")
		return rep
	}
	rep.Status = "done"
	// An empty revision records that nothing is declared any more.
	if _, err := s.saveRevision(ctx, project, env, nil); err != nil {
		rep.Status, rep.Reason = "stalled", err.Error()
	} else if err := s.clearRemoval(ctx, project, env); err != nil {
		rep.Status, rep.Reason = "stalled", err.Error()
	}
	return rep
}
