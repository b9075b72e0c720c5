package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
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
			return withClient(c, func(s *client.Session) error {
				ns, err := f.namespace(c.Context(), s)
				if err != nil {
					return err
				}
				in, snap, err := s.InspectService(c.Context(), ns, args[0], nil)
				return show(c, in, err, func(w io.Writer) error {
					render.Unobserved(c.ErrOrStderr(), snap)
					return render.ServiceInspection(w, in, snap, time.Now())
				})
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
		p, err := f.resolveProject(c.Context(), s)
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
				p, err := f.resolveProject(c.Context(), s)
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
	return showPartial(c, res, err, g.json, func(io.Writer) error {
		if rp.Plan.Changes() > 0 {
			render.Outcome(errw, rp.Plan, res.Outcome)
		}
		return nil
	})
}
