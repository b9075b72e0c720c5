package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Project names a project's environment (its namespace is
// <project>-<environment>).
type Project struct {
	Name        string
	Environment string
}

// Namespace is the project environment's namespace.
func (p Project) Namespace() string { return deploy.Namespace(p.Name, p.Environment) }

// LatestSaved returns the latest Saved State of every project that still
// declares something (a removed project's latest revision is empty), one
// per namespace: the Cluster's, so a teammate's projects count, plus this
// store's for a namespace the Cluster holds nothing of (never deployed
// since the import) or for every namespace when the entry keeps no
// revisions (an older release).
func (s *Session) LatestSaved(ctx context.Context) ([]operator.SavedState, error) {
	local, err := s.localLatestSaved()
	if err != nil {
		return nil, err
	}
	var out rpc.RevisionList
	err = rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListRevisions, rpc.ListRevisionsRequest{AllNamespaces: true, Latest: true, WithCompose: true}, &out)
	switch {
	case Unsupported(err) || invalidField(err, "namespace"):
		// An entry from before all_namespaces refuses the empty namespace.
		return local, nil
	case err != nil:
		return nil, fmt.Errorf("latest revisions: %w", err)
	}
	var states []operator.SavedState
	held := map[string]bool{}
	for _, r := range out.Revisions {
		held[r.Namespace] = true
		if !r.Removal {
			states = append(states, savedState(s.name, r))
		}
	}
	for _, st := range local {
		if !held[deploy.Namespace(st.Project, st.Environment)] {
			states = append(states, st)
		}
	}
	return states, nil
}

// invalidField reports a refusal naming field.
func invalidField(err error, field string) bool {
	var e *rpc.Error
	return errors.As(err, &e) && e.Code == rpc.CodeInvalidArgument && e.Details["field"] == field
}

// localLatestSaved is LatestSaved from this computer's store alone.
func (s *Session) localLatestSaved() ([]operator.SavedState, error) {
	states, err := s.st.States(s.name)
	if err != nil {
		return nil, err
	}
	var out []operator.SavedState
	done := map[string]bool{}
	for _, st := range states {
		ns := deploy.Namespace(st.Project, st.Environment)
		if done[ns] {
			continue
		}
		done[ns] = true
		latest, err := s.st.LatestState(s.name, st.Project, st.Environment)
		if err != nil || len(latest.Compose) == 0 {
			continue // an empty revision: the project was removed
		}
		out = append(out, latest)
	}
	return out, nil
}

// ProjectOf finds the project and environment of a namespace from the
// latest Saved States (a namespace alone cannot be split: both may hold '-').
func (s *Session) ProjectOf(ctx context.Context, ns string) (Project, error) {
	states, err := s.LatestSaved(ctx)
	if err != nil {
		return Project{}, err
	}
	for _, st := range states {
		if deploy.Namespace(st.Project, st.Environment) == ns {
			return Project{Name: st.Project, Environment: st.Environment}, nil
		}
	}
	return Project{}, fmt.Errorf("namespace %s: no Saved State; deploy it with `ployz deploy` first", ns)
}

// loadDeclarations loads a Saved State's declarations (no files read).
func loadDeclarations(ctx context.Context, s operator.SavedState) (deploy.App, error) {
	return deploy.Load(ctx, deploy.Source{Compose: s.Compose, ProjectName: s.Project, Environment: s.Environment, DeclarationsOnly: true})
}

// Declared returns namespace -> service -> the declaration from the
// latest Saved State of every project in the context.
func (s *Session) Declared(ctx context.Context) map[string]map[string]deploy.Service {
	out := map[string]map[string]deploy.Service{}
	states, _ := s.LatestSaved(ctx)
	for _, st := range states {
		app, err := loadDeclarations(ctx, st)
		if err != nil {
			continue
		}
		ns := deploy.Namespace(st.Project, st.Environment)
		out[ns] = map[string]deploy.Service{}
		for _, sv := range app.Services {
			out[ns][sv.Name] = sv
		}
	}
	return out
}

// Removing names the namespaces with a pending removal mark.
func (s *Session) Removing(ctx context.Context) map[string]bool {
	marks, _ := s.Removals(ctx)
	removing := map[string]bool{}
	for _, m := range marks {
		removing[deploy.Namespace(m.Project, m.Environment)] = true
	}
	return removing
}

// planLatest plans a Deploy of p's latest Saved State changed by edit.
func (s *Session) planLatest(ctx context.Context, p Project, why string, edit func([]byte) ([]byte, error), restart ...string) (*DeployPlan, error) {
	latest, err := s.latestState(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%w; deploy it first with `ployz deploy`", err)
	}
	if len(latest.Compose) == 0 {
		return nil, fmt.Errorf("%s was removed (revision %d); deploy it again with `ployz deploy`", p.Namespace(), latest.Revision)
	}
	b, err := edit(latest.Compose)
	if err != nil {
		return nil, err
	}
	return s.PlanDeploy(ctx, DeployRequest{Compose: b, File: "compose.yaml", Project: p.Name, Environment: p.Environment,
		NoBuild: true, Restart: restart, Why: fmt.Sprintf("%s (from revision %d)", why, latest.Revision)})
}

// PlanScale plans a Deploy of p's latest Saved State with service's
// replicas set to n (`ployz scale`, the dashboard's Scale).
func (s *Session) PlanScale(ctx context.Context, p Project, service string, n int) (*DeployPlan, error) {
	return s.planLatest(ctx, p, fmt.Sprintf("scale %s to %d", service, n), func(b []byte) ([]byte, error) {
		return deploy.SetReplicas(b, service, n)
	})
}

// PlanRestart plans a Deploy of p's latest Saved State replacing every
// running Container of service with a fresh one, start-first through the
// Serving Pointer, so clients see no gap.
func (s *Session) PlanRestart(ctx context.Context, p Project, service string) (*DeployPlan, error) {
	return s.planLatest(ctx, p, "restart "+service, func(b []byte) ([]byte, error) {
		return b, deploy.CheckService(b, service)
	}, service)
}

// PlanRemoveService plans a Deploy of p's latest Saved State without
// service: its Containers are pruned.
func (s *Session) PlanRemoveService(ctx context.Context, p Project, service string) (*DeployPlan, error) {
	return s.planLatest(ctx, p, "remove service "+service, func(b []byte) ([]byte, error) {
		return deploy.RemoveService(b, service)
	})
}
