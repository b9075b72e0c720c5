package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
)

func deployLsCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the Deploys this computer ran in the current context: live progress and each Machine's outcome",
		Long: `List the Deploys run from this computer (its operator store) in the context
the command uses (--context, else the current one), newest first: a running one with the steps in flight on each Machine,
a finished one with each Machine's outcome (completed, failed or never
attempted). This is the operator's record, not an observation of the Cluster:
` + "`ployz ps`" + ` shows what the Machines run.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withContexts(func(cs *client.Contexts) error {
				res, err := cs.Deploys(limit)
				return show(c, res, err, func(w io.Writer) error { render.Deploys(w, res.Deploys, res.Unreadable); return nil })
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many Deploys to list")
	return cmd
}
