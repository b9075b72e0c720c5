package main

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
)

func jobsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Scheduled jobs (compose x-schedule): schedules and runs"}
	var f projectFlags
	var all bool
	var runs int
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the scheduled jobs with their next tick and last runs (exit codes, durations)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				ns := s.NamespaceOrAll(c.Context(), f.project, f.env, "compose.yaml", all)
				jobs, err := s.Jobs(c.Context(), client.JobsRequest{Namespace: ns, Runs: runs})
				return show(c, map[string]any{"jobs": jobs}, err, func(w io.Writer) error { return render.Jobs(w, jobs, time.Now()) })
			})
		},
	}
	f.add(ls, false)
	ls.Flags().BoolVarP(&all, "all", "a", false, "every namespace")
	ls.Flags().IntVar(&runs, "runs", 5, "newest runs shown per job (at most 500)")
	cmd.AddCommand(ls)
	return cmd
}
