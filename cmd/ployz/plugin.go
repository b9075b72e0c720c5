package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/version"
)

// pluginCommand is `ployz plugin`.
func pluginCommand() *cobra.Command {
	c := &cobra.Command{Use: "plugin", Short: "Manage the plugins every Machine runs"}
	c.AddCommand(pluginUpgrade())
	return c
}

// pluginUpgrade is `ployz plugin upgrade NAME --bundle FILE`: the machine
// upgrade's push, checks and rollback for one bundled plugin.
func pluginUpgrade() *cobra.Command {
	var dryRun bool
	var bundle string
	c := &cobra.Command{
		Use:   "upgrade NAME --bundle FILE",
		Short: "Swap one bundled plugin onto a release bundle's binary on every Machine, one at a time",
		Long: "Pushes the bundle to each Machine over Machine RPC; the Machine verifies it and swaps only the plugin NAME\n" +
			"onto the bundle's binary (a data-plane plugin hands its sockets over without a gap), health-checks it and\n" +
			"the data plane, and on a failure puts the previous binary back and stops the rollout. Daemon, store and the\n" +
			"other plugins keep running. Exit 3 when any Machine did not end on the bundle's binary.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if bundle == "" {
				return fmt.Errorf("--bundle: required (the release bundle holding bin/ployz-%s)", args[0])
			}
			m, err := release.OpenManifest(bundle)
			if err != nil {
				return fmt.Errorf("--bundle %s: %w", bundle, err)
			}
			if m.ProtocolMajor != version.ProtocolMajor {
				return fmt.Errorf("--bundle %s: protocol_major is %d, this CLI speaks %d; an upgrade never crosses a protocol major", bundle, m.ProtocolMajor, version.ProtocolMajor)
			}
			return withSession(c, func(s session) error {
				return runPluginUpgrade(c, s, bundle, m, args[0], dryRun)
			})
		},
	}
	c.Flags().StringVar(&bundle, "bundle", "", "release bundle whose bin/ployz-NAME is installed")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	return c
}

func runPluginUpgrade(c *cobra.Command, s session, p string, m *release.Manifest, plugin string, dryRun bool) error {
	ctx, ent := c.Context(), s.ent
	var list rpc.MachineList
	if err := ent.Call(ctx, rpc.Target{}, rpc.CmdListMachines, nil, &list); err != nil {
		return err
	}
	targets := make([]release.PluginTarget, 0, len(list.Machines))
	for _, v := range list.Machines {
		t := release.PluginTarget{Machine: v}
		var in rpc.Inspection
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := ent.Call(cctx, rpc.Target{One: v.ID}, rpc.CmdInspect, nil, &in); err != nil {
			t.InspectErr = err.Error()
		} else {
			t.Inspection = &in
		}
		cancel()
		targets = append(targets, t)
	}
	plan, err := release.PlanPlugin(targets, m, plugin)
	if err != nil {
		return err
	}
	if dryRun {
		return printUpgradePlan(c, plan)
	}
	progress := progressTo(c)
	return rollout(c, plan, func(ctx context.Context, a release.Action) release.MachineOutcome {
		return upgradeOne(ctx, ent, p, m, a, plugin, progress)
	}, fmt.Sprintf("plugin upgrade: not every Machine runs %s from %s", plugin, m.Version))
}
