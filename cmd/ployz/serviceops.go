package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/deploy"
)

func serviceInspect() *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   "inspect SERVICE",
		Short: "Show a Service's execution status and ingress status",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withSession(c, func(s session) error {
				p, err := f.resolveProject(c.Context(), s.st, s.ctx)
				if err != nil {
					return err
				}
				in, snap, err := s.client().InspectService(c.Context(), deploy.Namespace(p, f.env), args[0], nil)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c.OutOrStdout(), in)
				}
				render.Unobserved(c.ErrOrStderr(), snap)
				w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintf(w, "service\t%s\nnamespace\t%s\nservice id\t%s\n", in.Service, in.Namespace, in.ServiceID)
				if d := in.Declared; d != nil {
					fmt.Fprintf(w, "declared\t%s, replicas %d, image %s, readiness %s\n", d.Mode, d.Replicas, d.Image, d.Readiness)
				}
				e := in.Execution
				fmt.Fprintf(w, "execution\t%s (desired %d, running %d, ready %d, restarts %d)\n", e.Status, e.Desired, e.Running, e.Ready, e.Restarts)
				if len(e.NotReadyOn) > 0 {
					fmt.Fprintf(w, "  not ready on\t%s\n", strings.Join(e.NotReadyOn, ", "))
				}
				if in.Ingress.Reason != "" {
					fmt.Fprintf(w, "ingress\t%s (%s)\n", in.Ingress.Status, in.Ingress.Reason)
				} else {
					fmt.Fprintf(w, "ingress\t%s\n", in.Ingress.Status)
				}
				for _, r := range in.Ingress.Routes {
					fmt.Fprintf(w, "  route\t%s -> :%d\n", r.Key(), r.ContainerPort)
				}
				for _, m := range in.Ingress.Machines {
					if m.Error != "" {
						fmt.Fprintf(w, "  on %s\tunknown: %s\n", m.Machine, m.Error)
					}
					for _, r := range m.Routes {
						detail := r.Detail
						if len(r.Upstreams) > 0 {
							detail = strings.TrimSpace("-> " + strings.Join(r.Upstreams, ",") + " " + detail)
						}
						fmt.Fprintf(w, "  on %s\t%s %s %s\n", m.Machine, r.Key(), r.State, detail)
					}
				}
				if sv := in.Serving; sv != nil {
					acked := 0
					for _, a := range sv.Acks {
						if a.Current(sv.Pointer) {
							acked++
						}
					}
					fmt.Fprintf(w, "serving pointer\t%s (deployment %s, %d Container(s)), acked by %d of %d Machines", sv.Pointer, sv.Deployment, len(sv.Containers), acked, len(sv.Acks))
					if p := sv.Pending(); len(p) > 0 {
						fmt.Fprintf(w, "; waiting for %s", strings.Join(p, ", "))
					}
					fmt.Fprintln(w)
				}
				for _, co := range in.Containers {
					fmt.Fprintf(w, "  container\t%s on %s: %s, ready %t, %s, restarts %d, last exit %s\n", co.Name, machineName(snap, co.MachineID),
						co.State, co.Ready, co.IP, co.RestartCount, render.LastExit(co, time.Now()))
				}
				return w.Flush()
			})
		},
	}
	f.add(cmd, false)
	return cmd
}

// latestDeploy shows, confirms and applies a Deploy of the resolved
// project's latest Saved State that plan makes.
func latestDeploy(c *cobra.Command, f projectFlags, plan func(s *client.Session, p client.Project) (*client.DeployPlan, error)) error {
	return withClient(c, func(s *client.Session) error {
		p, err := f.resolveProject(c.Context(), s.Store(), s.ContextName())
		if err != nil {
			return err
		}
		dp, err := plan(s, client.Project{Name: p, Environment: f.env})
		if err != nil {
			return err
		}
		return confirmAndApply(c, s, dp)
	})
}

// restartCommand replaces every running Container of a Service with a
// fresh one of the same spec, start-first through the Serving Pointer, so
// clients see no gap (a new revision of the same compose file).
func restartCommand() *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   "restart SERVICE",
		Short: "Replace a Service's running Containers with fresh ones, start-first (no gap for clients)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return latestDeploy(c, f, func(s *client.Session, p client.Project) (*client.DeployPlan, error) {
				return s.PlanRestart(c.Context(), p, args[0])
			})
		},
	}
	f.add(cmd, false)
	return cmd
}

func scaleCommand() *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   "scale SERVICE REPLICAS",
		Short: "Deploy the latest Saved State with SERVICE's replicas changed (a new revision)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return fmt.Errorf("REPLICAS %q: want a number >= 0", args[1])
			}
			return latestDeploy(c, f, func(s *client.Session, p client.Project) (*client.DeployPlan, error) {
				return s.PlanScale(c.Context(), p, args[0], n)
			})
		},
	}
	f.add(cmd, false)
	return cmd
}

func rmCommand() *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   "rm SERVICE",
		Short: "Deploy the latest Saved State without SERVICE (a new revision); its Containers are pruned",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return latestDeploy(c, f, func(s *client.Session, p client.Project) (*client.DeployPlan, error) {
				return s.PlanRemoveService(c.Context(), p, args[0])
			})
		},
	}
	f.add(cmd, false)
	return cmd
}

// startStopCommand starts or stops a Service's existing Containers. It
// does not change the Saved State: the next deploy starts stopped
// up-to-date Containers again (use scale SERVICE 0 to keep them stopped).
func startStopCommand(verb string) *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   verb + " SERVICE",
		Short: verb + " a Service's existing Containers on every Machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				p, err := f.resolveProject(c.Context(), s.Store(), s.ContextName())
				if err != nil {
					return err
				}
				rp, err := s.PlanStartStop(c.Context(), deploy.Namespace(p, f.env), args[0], verb)
				if err != nil {
					return err
				}
				return applyRows(c, s, rp)
			})
		},
	}
	f.add(cmd, false)
	return cmd
}

// applyRows shows, confirms and applies hand-made rows (start, stop),
// exiting 3 when partial or when Machines were unseen.
func applyRows(c *cobra.Command, s *client.Session, rp *client.RowsPlan) error {
	errw := c.ErrOrStderr()
	if !g.json {
		render.Plan(errw, rp.Plan, "")
		render.Unobserved(errw, rp.Snapshot)
	}
	if n := rp.Plan.Changes(); n > 0 {
		if err := confirm(c, fmt.Sprintf("Apply %d change(s) to %s?", n, rp.Plan.Namespace)); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := s.ApplyRows(ctx, rp, cliHooks(c))
	if err != nil && !client.IsPartial(err) {
		return err
	}
	if g.json {
		if perr := printJSON(c.OutOrStdout(), res); perr != nil {
			return perr
		}
	} else if rp.Plan.Changes() > 0 {
		render.Outcome(errw, rp.Plan, res.Outcome)
	}
	return exitFor(err, g.json)
}
