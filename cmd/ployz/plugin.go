package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
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
		Long: "The bundle must be signed by a release key this CLI trusts: FILE.sig beside it, or the signed release.json of\n" +
			"its directory listing it (docs/releases.md); each Machine checks that signature again against its own keys.\n" +
			"Pushes the bundle to each Machine over Machine RPC; the Machine verifies it and swaps only the plugin NAME\n" +
			"onto the bundle's binary (a data-plane plugin hands its sockets over without a gap), health-checks it and\n" +
			"the data plane, and on a failure puts the previous binary back and stops the rollout. Daemon, store and the\n" +
			"other plugins keep running. Exit 3 when any Machine did not end on the bundle's binary.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if bundle == "" {
				return fmt.Errorf("--bundle: required (the release bundle holding bin/ployz-%s)", args[0])
			}
			up, _, err := client.Upgrade{Plugin: args[0]}.WithBundle(bundle, false)
			if err != nil {
				return err
			}
			return runUpgrade(c, up, nil, dryRun)
		},
	}
	c.Flags().StringVar(&bundle, "bundle", "", "release bundle whose bin/ployz-NAME is installed (signed: FILE.sig or its release's release.json beside it)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	return c
}
