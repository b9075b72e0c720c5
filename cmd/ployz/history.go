package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

// historyResult is `ployz history --json`.
type historyResult struct {
	Entries []rpc.HistoryEntry `json:"entries"`
}

// historyCommand is `ployz history`: the Cluster's operator history,
// read from the entry, so every operator sees the same.
func historyCommand() *cobra.Command {
	var project, env string
	var f client.HistoryFilter
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List what operators did to the Cluster: deploys, rollbacks, scales, restarts, removals, drains and Volume Runs",
		Long: `List the Cluster's operator history, newest first: every deploy, rollback, scale,
restart, removal, drain and Volume Run any operator ran, with who ran it (the
context's operator name and the SSH key's fingerprint), its revision and how it
ended. The history is replicated: any operator reaching any Machine sees it.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if project != "" {
				f.Namespace = deploy.Namespace(project, env)
			}
			if err := f.Validate(); err != nil {
				return err
			}
			return withClient(c, func(s *client.Session) error {
				entries, err := s.History(c.Context(), f)
				return show(c, historyResult{Entries: entries}, err, func(w io.Writer) error { return render.History(w, entries) })
			})
		},
	}
	cmd.Flags().StringVarP(&project, "project-name", "p", "", "only this project's operations (namespace <project>-<env>)")
	cmd.Flags().StringVar(&env, "env", deploy.DefaultEnvironment, "the project's environment, with -p")
	cmd.Flags().StringVar(&f.Kind, "kind", "", "only operations of this kind: deploy, rollback, scale, restart, remove-service, remove, drain, undrain, catch-up or volume-run")
	cmd.Flags().IntVar(&f.Limit, "limit", 50, "how many operations to list")
	return cmd
}
