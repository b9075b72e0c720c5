package client

import (
	"context"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Removal marks live in the Cluster (removals, through the entry), so
// the next deploy or `project rm` of any operator finishes a removal
// another one started. Against an entry that keeps none (an older
// release) this computer's operator store keeps them, as before.

// markRemoval marks project's env for removal.
func (s *Session) markRemoval(ctx context.Context, project, env string) error {
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.MarkRemoval, rpc.MarkRemovalRequest{RemovalMark: rpc.RemovalMark{Project: project,
		Environment: env, Operator: s.Operator().History()}}, nil)
	if Unsupported(err) {
		return s.st.MarkRemoval(s.name, project, env)
	}
	if err != nil {
		return fmt.Errorf("mark %s/%s for removal in the Cluster: %w", project, env, err)
	}
	return nil
}

// clearRemoval drops project's env's mark, in the Cluster and here (a
// mark this computer kept before the Cluster did is finished too).
func (s *Session) clearRemoval(ctx context.Context, project, env string) error {
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ClearRemoval, rpc.ClearRemovalRequest{Project: project, Environment: env}, nil)
	if err != nil && !Unsupported(err) {
		return fmt.Errorf("clear the removal mark of %s/%s in the Cluster: %w", project, env, err)
	}
	return s.st.ClearRemoval(s.name, project, env)
}

// Removals are the pending removal marks: the Cluster's, or this
// computer's against an older entry.
func (s *Session) Removals(ctx context.Context) ([]operator.Removal, error) {
	var out rpc.RemovalMarks
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListRemovals, rpc.None{}, &out)
	if Unsupported(err) {
		return s.st.Removals(s.name)
	}
	if err != nil {
		return nil, fmt.Errorf("removal marks: %w", err)
	}
	marks := make([]operator.Removal, 0, len(out.Removals))
	for _, m := range out.Removals {
		marks = append(marks, operator.Removal{Context: s.name, Project: m.Project, Environment: m.Environment,
			CreatedAt: time.UnixMilli(m.CreatedAt).UTC()})
	}
	return marks, nil
}
