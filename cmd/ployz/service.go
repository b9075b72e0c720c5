package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"

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
}

func withSession(c *cobra.Command, f func(s session) error) error {
	st, err := openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	ent, oc, err := entry(c.Context(), st)
	if err != nil {
		return err
	}
	defer ent.Close()
	return f(session{st: st, ent: ent, ctx: oc.Name})
}

// latestSaved returns the latest Saved State of every project of the
// context that still declares something (a removed project's latest
// revision is empty), one per namespace.
func latestSaved(st *operator.Store, ctxName string) ([]operator.SavedState, error) {
	states, err := st.States(ctxName)
	if err != nil {
		return nil, err
	}
	var out []operator.SavedState
	done := map[string]bool{}
	for _, s := range states {
		ns := deploy.Namespace(s.Project, s.Environment)
		if done[ns] {
			continue
		}
		done[ns] = true
		latest, err := st.LatestState(ctxName, s.Project, s.Environment)
		if err != nil || len(latest.Compose) == 0 {
			continue // an empty revision: the project was removed
		}
		out = append(out, latest)
	}
	return out, nil
}

// loadDeclarations loads a Saved State's declarations (no files read).
func loadDeclarations(ctx context.Context, s operator.SavedState) (deploy.App, error) {
	return deploy.Load(ctx, deploy.Source{Compose: s.Compose, ProjectName: s.Project, Environment: s.Environment, DeclarationsOnly: true})
}

// declared returns namespace -> service -> the declaration from the
// latest Saved State of every project in the context.
func declared(ctx context.Context, st *operator.Store, ctxName string) map[string]map[string]deploy.Service {
	out := map[string]map[string]deploy.Service{}
	states, _ := latestSaved(st, ctxName)
	for _, s := range states {
		app, err := loadDeclarations(ctx, s)
		if err != nil {
			continue
		}
		ns := deploy.Namespace(s.Project, s.Environment)
		out[ns] = map[string]deploy.Service{}
		for _, sv := range app.Services {
			out[ns][sv.Name] = sv
		}
	}
	return out
}

func warnUnobserved(w io.Writer, snap deploy.Snapshot) {
	if !snap.Complete() {
		fmt.Fprintln(w, "warning: not observed:", snap.MissingNames())
	}
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
				out := views.Services(snap, declared(c.Context(), s.st, s.ctx), removingNamespaces(s), ns)
				if g.json {
					return printJSON(c.OutOrStdout(), map[string]any{"services": out, "unobserved": snap.Missing})
				}
				warnUnobserved(c.ErrOrStderr(), snap)
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

// removingNamespaces names the namespaces with a pending removal mark.
func removingNamespaces(s session) map[string]bool {
	marks, _ := s.st.Removals(s.ctx)
	removing := map[string]bool{}
	for _, m := range marks {
		removing[deploy.Namespace(m.Project, m.Environment)] = true
	}
	return removing
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
				warnUnobserved(c.ErrOrStderr(), snap)
				w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "MACHINE\tNAMESPACE\tSERVICE\tCONTAINER\tSTATE\tHEALTH\tREADY\tRESTARTS\tLAST EXIT\tIP\tIMAGE")
				now := time.Now()
				for _, r := range out {
					health := r.Health
					if health == "" {
						health = "-"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%t\t%d\t%s\t%s\t%s\n", r.Machine, r.Namespace, r.Service, r.Name, r.State, health, r.Ready,
						r.RestartCount, lastExit(r.ContainerObservation, now), r.IP, r.Image)
				}
				return w.Flush()
			})
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVarP(&all, "all", "a", false, "every namespace")
	return cmd
}

// serviceContainers observes ns and returns the Service's Containers
// (hooks excluded).
// observeService resolves the project from f, then observes the
// Containers of service in its namespace.
func (f projectFlags) observeService(ctx context.Context, s session, service string) (string, deploy.Snapshot, []rpc.ContainerObservation, error) {
	p, err := f.resolveProject(ctx, s.st, s.ctx)
	if err != nil {
		return "", deploy.Snapshot{}, nil, err
	}
	ns := deploy.Namespace(p, f.env)
	snap, cs, err := serviceContainers(ctx, s, ns, service)
	return ns, snap, cs, err
}

func serviceContainers(ctx context.Context, s session, ns, service string) (deploy.Snapshot, []rpc.ContainerObservation, error) {
	snap, err := deploy.Observe(ctx, s.ent, ns, false)
	if err != nil {
		return snap, nil, err
	}
	return snap, serviceOf(snap, ns, service), nil
}

// serviceOf is a Service's Containers in a snapshot (hooks excluded).
func serviceOf(snap deploy.Snapshot, ns, service string) []rpc.ContainerObservation {
	var out []rpc.ContainerObservation
	for _, co := range snap.Containers(ns) {
		if co.Service == service && co.Labels[rpc.LabelKind] != "hook" {
			out = append(out, co)
		}
	}
	return out
}

// machineName returns a Machine's name in the snapshot.
func machineName(snap deploy.Snapshot, id string) string { return views.MachineName(snap, id) }

func errNoService(service, ns string, snap deploy.Snapshot) error {
	if !snap.Complete() {
		return fmt.Errorf("service %q: no Container found in %s on the observed Machines; not observed: %s", service, ns, snap.MissingNames())
	}
	return fmt.Errorf("service %q: no Container found in %s", service, ns)
}

// lastExit describes a Container's last exit for people: its code, an OOM
// kill, and how long ago; "-" when it never exited.
func lastExit(co rpc.ContainerObservation, now time.Time) string {
	at, err := time.Parse(time.RFC3339, co.FinishedAt)
	if err != nil {
		return "-"
	}
	s := strconv.Itoa(co.ExitCode)
	if co.OOMKilled {
		s += " OOM-killed"
	}
	return s + " (" + units.HumanDuration(now.Sub(at)) + " ago)"
}
