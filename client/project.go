package client

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
)

// ProjectName is the project a command acts on: named (the operator's
// --project-name), else the name: of the compose file at composePath
// (one that is missing or does not load is passed over), else the
// context's only project with saved state.
func ProjectName(ctx context.Context, st *operator.Store, contextName, named, env, composePath string) (string, error) {
	return projectName(ctx, named, env, composePath, func() ([]operator.SavedState, error) { return st.States(contextName) })
}

// ProjectName is the package's ProjectName with the Saved States the
// Session sees (LatestSaved: the Cluster's, so a teammate's only project
// is found too, and a removed one is not).
func (s *Session) ProjectName(ctx context.Context, named, env, composePath string) (string, error) {
	return projectName(ctx, named, env, composePath, func() ([]operator.SavedState, error) { return s.LatestSaved(ctx) })
}

func projectName(ctx context.Context, named, env, composePath string, saved func() ([]operator.SavedState, error)) (string, error) {
	if named != "" {
		return named, nil
	}
	if b, err := os.ReadFile(composePath); err == nil {
		if app, err := deploy.Load(ctx, deploy.Source{Compose: b, Environment: env, DeclarationsOnly: true}); err == nil {
			return app.Project, nil
		}
	}
	states, err := saved()
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	var names []string
	for _, s := range states {
		if !seen[s.Project] {
			seen[s.Project] = true
			names = append(names, s.Project)
		}
	}
	if len(names) == 1 {
		return names[0], nil
	}
	return "", fmt.Errorf("which project? pass --project-name (saved projects: %s)", strings.Join(names, ", "))
}
