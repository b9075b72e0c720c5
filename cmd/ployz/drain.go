package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/rpc"
)

func machineDrain() *cobra.Command {
	return &cobra.Command{
		Use:   "drain MACHINE",
		Short: "Stop placing Containers on MACHINE and move its Service Containers to other Machines, start-first",
		Long: "drain marks MACHINE drained (no new Container is placed there) and redeploys every project's latest\n" +
			"Saved State, so each Service's Containers on MACHINE are replaced on other eligible Machines before\n" +
			"they stop (the Serving Pointer moves first: clients see no gap). A Service with nowhere else to go,\n" +
			"such as one whose volume is local to MACHINE, stays and is reported; none loses its last Container.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return setDrained(c, args[0], true)
		},
	}
}

func machineUndrain() *cobra.Command {
	return &cobra.Command{
		Use:   "undrain MACHINE",
		Short: "Make MACHINE eligible for placement again (Global Services start there at once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return setDrained(c, args[0], false)
		},
	}
}

// setDrained drains or undrains the Machine through the library, showing
// and confirming each namespace's redeploy, then prints the report; a
// namespace that failed or a Container that could not move exits 3.
func setDrained(c *cobra.Command, machine string, drained bool) error {
	return withClient(c, func(s *client.Session) error {
		ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		rep, err := s.Drain(ctx, client.Drain{Machine: machine, Undrain: !drained, Marked: func(in rpc.Inspection) {
			if drained {
				fmt.Fprintf(c.ErrOrStderr(), "%s is drained: no new Container is placed there\n", in.Name)
			} else {
				fmt.Fprintf(c.ErrOrStderr(), "%s takes new Containers again\n", in.Name)
			}
		}, Confirm: func(dp *client.DeployPlan) error { return confirmPlan(c, dp) }, Done: namespaceDone(c), Hooks: cliHooks(c)})
		return showPartial(c, rep, err, g.json, func(io.Writer) error {
			for _, r := range rep.Remaining {
				fmt.Fprintf(c.ErrOrStderr(), "still on %s: %s/%s (%s): %s\n", rep.Machine, r.Namespace, r.Service, r.Container, r.Reason)
			}
			return nil
		})
	})
}

// namespaceDone prints one redeployed namespace's end (not under --json:
// the report carries it).
func namespaceDone(c *cobra.Command) func(client.NamespaceResult) {
	return func(r client.NamespaceResult) {
		if g.json {
			return
		}
		if r.Result != nil {
			render.DeployResult(c.ErrOrStderr(), *r.Result)
		}
		if r.Error != "" {
			fmt.Fprintf(c.ErrOrStderr(), "%s: %s\n", r.Namespace, r.Error)
		}
	}
}

// globalCatchUp redeploys the saved namespaces that declare a Global
// Service, so a new Machine runs its Global slots at once.
func globalCatchUp(c *cobra.Command, machine string) error {
	return withClient(c, func(s *client.Session) error {
		err := s.GlobalCatchUp(c.Context(), machine, client.Reconcile{Confirm: func(dp *client.DeployPlan) error { return confirmPlan(c, dp) },
			Done: namespaceDone(c), Hooks: cliHooks(c)})
		return exitFor(err, false)
	})
}
