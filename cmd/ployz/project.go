package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
)

// removalReport is how one pending project removal stands.
type removalReport struct {
	Project     string `json:"project"`
	Environment string `json:"environment"`
	// Status is done (nothing of it runs on any Machine, all observed) or
	// stalled (something could not be reached or removed; Reason says what).
	Status  string `json:"status"`
	Removed int    `json:"removed"`
	Reason  string `json:"reason,omitempty"`
}

// finishRemovals tries every pending removal mark of the context against
// snap (which must hold all namespaces): it removes what it can reach and
// clears a mark only when a complete snapshot shows nothing left. Marks
// are never retried on a timer; each command that meets them tries again.
func finishRemovals(ctx context.Context, c deploy.Caller, st *operator.Store, ctxName string, snap deploy.Snapshot, skipNS string, w io.Writer) []removalReport {
	marks, err := st.Removals(ctxName)
	if err != nil {
		fmt.Fprintln(w, "warning: removal marks:", err)
		return nil
	}
	var out []removalReport
	for _, m := range marks {
		ns := deploy.Namespace(m.Project, m.Environment)
		if ns == skipNS {
			continue
		}
		rep := removalReport{Project: m.Project, Environment: m.Environment}
		plan := deploy.Plan{Namespace: ns, DeploymentID: "(removal)"}
		for _, co := range snap.Containers(ns) {
			plan.Rows = append(plan.Rows, deploy.Row{MachineID: co.MachineID, Machine: machineName(snap, co.MachineID), Service: co.Service,
				Op: deploy.OpRemove, Reason: "project removal", OldID: co.ID, OldName: co.Name})
		}
		o := (&deploy.Executor{C: c, Progress: progressPrinter(w)}).Run(ctx, plan)
		rep.Removed = len(plan.Rows) - o.FailedRows()
		var reasons []string
		if !snap.Complete() {
			reasons = append(reasons, "Machines not observed: "+snap.MissingNames())
		}
		for _, s := range o.Steps {
			if s.Status == deploy.StepFailed {
				reasons = append(reasons, fmt.Sprintf("%s %s on %s: %s", s.Action, s.Container, s.Machine, s.Error))
			}
		}
		if len(reasons) == 0 {
			rep.Status = "done"
			// An empty revision records that nothing is declared any more.
			if _, err := st.SaveState(ctxName, m.Project, m.Environment, nil); err != nil {
				rep.Status, rep.Reason = "stalled", err.Error()
			} else if err := st.ClearRemoval(ctxName, m.Project, m.Environment); err != nil {
				rep.Status, rep.Reason = "stalled", err.Error()
			}
		} else {
			rep.Status, rep.Reason = "stalled", strings.Join(reasons, "; ")
		}
		fmt.Fprintf(w, "removal of %s: %s, %d Container(s) removed", ns, rep.Status, rep.Removed)
		if rep.Reason != "" {
			fmt.Fprintf(w, " (%s)", rep.Reason)
		}
		fmt.Fprintln(w)
		out = append(out, rep)
	}
	return out
}

func projectRm() *cobra.Command {
	var env string
	cmd := &cobra.Command{
		Use:   "rm PROJECT",
		Short: "Mark a project's environment for removal and remove what can be reached",
		Long: "Sets a removal mark in the operator store, then stops and removes every Container of\n" +
			"<project>-<env> on the Machines it can reach. Unreachable Machines leave the removal\n" +
			"stalled with its reason; a later deploy or `ployz project rm` finishes it. Nothing\n" +
			"retries on a timer. Volumes are kept.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withSession(c, func(s session) error {
				ns := deploy.Namespace(args[0], env)
				if err := confirm(c, fmt.Sprintf("Remove every Container of %s?", ns)); err != nil {
					return err
				}
				if err := s.st.MarkRemoval(s.ctx, args[0], env); err != nil {
					return err
				}
				snap, err := deploy.Observe(c.Context(), s.ent, "", false)
				if err != nil {
					return fmt.Errorf("removal of %s is marked but stalled: %w", ns, err)
				}
				reps := finishRemovals(c.Context(), s.ent, s.st, s.ctx, snap, "", c.ErrOrStderr())
				if g.json {
					if err := printJSON(c.OutOrStdout(), map[string]any{"removals": reps, "unobserved": snap.Missing}); err != nil {
						return err
					}
				}
				for _, r := range reps {
					if r.Status != "done" {
						return &exitError{code: 3, err: fmt.Errorf("removal of %s-%s is stalled: %s", r.Project, r.Environment, r.Reason), silent: g.json}
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&env, "env", deploy.DefaultEnvironment, "environment")
	return cmd
}
