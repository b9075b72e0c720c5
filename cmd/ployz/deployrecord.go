package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
)

// deployLsResult is `ployz deploy ls --json`.
type deployLsResult struct {
	Deploys      []deploy.Record      `json:"deploys"`
	LastOutcomes []deploy.LastOutcome `json:"last_outcomes"`
	Unreadable   []string             `json:"unreadable,omitempty"`
}

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
			if limit < 1 {
				return fmt.Errorf("--limit: must be at least 1, got %d", limit)
			}
			return withContext(func(st *operator.Store, ctxName string) error {
				recs, skipped, err := client.DeployRecords(st, ctxName, limit)
				if err != nil {
					return err
				}
				res := deployLsResult{Deploys: recs, LastOutcomes: deploy.LastOutcomes(recs), Unreadable: skipped}
				if res.Deploys == nil {
					res.Deploys = []deploy.Record{}
				}
				return show(c, res, nil, func(w io.Writer) error { render.Deploys(w, res.Deploys, res.Unreadable); return nil })
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many Deploys to list")
	return cmd
}

// withContext runs f with the operator store and the name of the context
// the command uses (--context, PLOYZ_CONTEXT, the current one): the
// operator's own records, no Machine asked.
func withContext(f func(st *operator.Store, ctxName string) error) error {
	st, err := openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	oc, err := operator.Resolve(st, g.context)
	if err != nil {
		return err
	}
	return f(st, oc.Name)
}
