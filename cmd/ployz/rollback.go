package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
)

// rollbackCommand deploys a saved revision again through the normal plan,
// confirmation and zero-gap path, and saves it as a new revision.
func rollbackCommand() *cobra.Command {
	var f deployFlags
	var to int
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Deploy a saved revision again (default: the newest completed one before the latest revision)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("to") && to < 1 {
				return fmt.Errorf("--to %d: a revision is a number from 1", to)
			}
			return withClient(c, func(s *client.Session) error {
				p, err := f.resolveProject(c.Context(), s)
				if err != nil {
					return err
				}
				dp, err := s.PlanRollback(c.Context(), client.Project{Name: p, Environment: f.env}, to, f.dryRun, f.timeout)
				if err != nil {
					return err
				}
				return showOrApply(c, s, dp, f.dryRun)
			})
		},
	}
	f.add(cmd, false)
	cmd.Flags().IntVar(&to, "to", 0, "the revision to deploy again (`ployz deploy ls` lists revisions)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print the plan and stop")
	cmd.Flags().DurationVar(&f.timeout, "ready-timeout", client.DefaultReadyTimeout, "how long each Container may take to become ready")
	return cmd
}
