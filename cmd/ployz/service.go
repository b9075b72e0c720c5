package main

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
)

// serviceCommand is `ployz service`.
func serviceCommand() *cobra.Command {
	svc := &cobra.Command{Use: "service", Short: "Inspect Services"}
	svc.AddCommand(serviceInspect(), restartCommand(), &cobra.Command{
		Use:   "restore-replicas",
		Short: "Replace the replicas Down Machines served on the Machines that answer, start-first (every saved project)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				rep, err := s.RestoreReplicas(c.Context(), client.Reconcile{Confirm: func(dp *client.DeployPlan) error { return confirmPlan(c, dp) },
					Done: namespaceDone(c), Hooks: cliHooks(c)})
				return showPartial(c, rep, err, g.json, func(io.Writer) error { return nil })
			})
		},
	})
	return svc
}

// projectCommand is `ployz project`.
func projectCommand() *cobra.Command {
	project := &cobra.Command{Use: "project", Short: "Manage projects"}
	project.AddCommand(projectRm())
	return project
}

func lsCommand() *cobra.Command {
	var f projectFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List Services: desired against running and ready Containers",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				ns := s.NamespaceOrAll(c.Context(), f.project, f.env, "compose.yaml", all)
				out, snap, err := s.Services(c.Context(), ns)
				return show(c, map[string]any{"services": out, "unobserved": snap.Missing}, err, func(w io.Writer) error {
					render.Unobserved(c.ErrOrStderr(), snap)
					marks, _ := s.Removals(c.Context())
					render.RemovalMarks(c.ErrOrStderr(), marks)
					return render.Services(w, out)
				})
			})
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVarP(&all, "all", "a", false, "every namespace")
	return cmd
}

func psCommand() *cobra.Command {
	var f projectFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "ps [SERVICE]",
		Short: "List Service Containers on every Machine",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				service := ""
				if len(args) == 1 {
					service = args[0]
				}
				ns := s.NamespaceOrAll(c.Context(), f.project, f.env, "compose.yaml", all)
				out, snap, err := s.Containers(c.Context(), ns, service)
				// A failed last run of a scheduled job shows here too.
				failed := s.FailedJobsOf(c.Context(), ns, service)
				return show(c, map[string]any{"containers": out, "unobserved": snap.Missing, "failed_jobs": failed}, err, func(w io.Writer) error {
					render.Unobserved(c.ErrOrStderr(), snap)
					if err := render.Containers(w, out, time.Now()); err != nil {
						return err
					}
					render.FailedJobs(w, failed)
					return nil
				})
			})
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVarP(&all, "all", "a", false, "every namespace")
	return cmd
}
