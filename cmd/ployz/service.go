package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
)

// serviceCommand is `ployz service`.
func serviceCommand() *cobra.Command {
	svc := &cobra.Command{Use: "service", Short: "Inspect Services"}
	svc.AddCommand(serviceInspect(), restartCommand())
	return svc
}

// projectCommand is `ployz project`.
func projectCommand() *cobra.Command {
	project := &cobra.Command{Use: "project", Short: "Manage projects"}
	project.AddCommand(projectRm())
	return project
}

// session is an open store, entry and context name for one command.
type session struct {
	st  *operator.Store
	ent *rpc.Client
	ctx string
	// cl is the Session opened (its operator and lease wait).
	cl *client.Session
}

// client is the operator library over the session's store and entry.
func (s session) client() *client.Session {
	if s.cl != nil {
		return s.cl
	}
	return client.New(s.st, s.ent, s.ctx)
}

func withSession(c *cobra.Command, f func(s session) error) error {
	return withClient(c, func(s *client.Session) error {
		return f(session{st: s.Store(), ent: s.Entry(), ctx: s.ContextName(), cl: s})
	})
}

func lsCommand() *cobra.Command {
	var f projectFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List Services: desired against running and ready Containers",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withSession(c, func(s session) error {
				ns := ""
				if !all {
					// No project to be found: every namespace.
					if p, err := f.resolveProject(c.Context(), s.st, s.ctx); err == nil {
						ns = deploy.Namespace(p, f.env)
					}
				}
				snap, err := deploy.Observe(c.Context(), s.ent, ns, false)
				if err != nil {
					return err
				}
				out := views.Services(snap, s.client().Declared(c.Context()), s.client().Removing(), ns)
				if g.json {
					return printJSON(c.OutOrStdout(), map[string]any{"services": out, "unobserved": snap.Missing})
				}
				render.Unobserved(c.ErrOrStderr(), snap)
				printRemovalMarks(c.ErrOrStderr(), s)
				w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAMESPACE\tSERVICE\tDESIRED\tRUNNING\tREADY\tCONTAINERS\tRESTARTS\tNOTE")
				for _, r := range out {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.Namespace, r.Service, r.Desired, r.Running, r.Ready, r.Total, r.Restarts, r.Note())
				}
				return w.Flush()
			})
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVarP(&all, "all", "a", false, "every namespace")
	return cmd
}

func printRemovalMarks(w io.Writer, s session) {
	marks, _ := s.st.Removals(s.ctx)
	for _, m := range marks {
		fmt.Fprintf(w, "note: %s has a pending removal since %s; `ployz project rm %s --env %s` retries it\n",
			deploy.Namespace(m.Project, m.Environment), m.CreatedAt.Format("2006-01-02 15:04"), m.Project, m.Environment)
	}
}

func psCommand() *cobra.Command {
	var f projectFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "ps [SERVICE]",
		Short: "List Service Containers on every Machine",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withSession(c, func(s session) error {
				ns := ""
				if !all {
					// No project to be found: every namespace.
					if p, err := f.resolveProject(c.Context(), s.st, s.ctx); err == nil {
						ns = deploy.Namespace(p, f.env)
					}
				}
				snap, err := deploy.Observe(c.Context(), s.ent, ns, false)
				if err != nil {
					return err
				}
				type psRow struct {
					Machine string `json:"machine"`
					rpc.ContainerObservation
				}
				var out []psRow
				for _, m := range snap.Machines {
					for _, co := range m.Containers {
						if len(args) == 1 && co.Service != args[0] {
							continue
						}
						out = append(out, psRow{Machine: m.Name, ContainerObservation: co})
					}
				}
				if g.json {
					return printJSON(c.OutOrStdout(), map[string]any{"containers": out, "unobserved": snap.Missing})
				}
				render.Unobserved(c.ErrOrStderr(), snap)
				w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "MACHINE\tNAMESPACE\tSERVICE\tCONTAINER\tSTATE\tHEALTH\tREADY\tRESTARTS\tLAST EXIT\tIP\tIMAGE")
				now := time.Now()
				for _, r := range out {
					health := r.Health
					if health == "" {
						health = "-"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%t\t%d\t%s\t%s\t%s\n", r.Machine, r.Namespace, r.Service, r.Name, r.State, health, r.Ready,
						r.RestartCount, render.LastExit(r.ContainerObservation, now), r.IP, r.Image)
				}
				return w.Flush()
			})
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVarP(&all, "all", "a", false, "every namespace")
	return cmd
}

// observeService resolves the project from f, then observes the
// Containers of service in its namespace.
func (f projectFlags) observeService(ctx context.Context, s *client.Session, service string) (string, deploy.Snapshot, []rpc.ContainerObservation, error) {
	p, err := f.resolveProject(ctx, s.Store(), s.ContextName())
	if err != nil {
		return "", deploy.Snapshot{}, nil, err
	}
	ns := deploy.Namespace(p, f.env)
	snap, cs, err := s.ServiceContainers(ctx, ns, service)
	return ns, snap, cs, err
}

// machineName returns a Machine's name in the snapshot.
func machineName(snap deploy.Snapshot, id string) string { return views.MachineName(snap, id) }
