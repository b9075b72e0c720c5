package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/deploy"
)

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
			return withClient(c, func(s *client.Session) error {
				if err := confirm(c, fmt.Sprintf("Remove every Container of %s?", deploy.Namespace(args[0], env))); err != nil {
					return err
				}
				rm, err := s.RemoveProject(c.Context(), args[0], env, cliHooks(c))
				return showPartial(c, rm, err, g.json, func(io.Writer) error { return nil })
			})
		},
	}
	cmd.Flags().StringVar(&env, "env", deploy.DefaultEnvironment, "environment")
	return cmd
}
