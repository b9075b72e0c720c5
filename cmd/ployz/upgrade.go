package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
)

// machineUpgrade is `ployz machine upgrade` (docs/upgrades.md).
func machineUpgrade() *cobra.Command {
	var all, dryRun bool
	var bundle string
	var ch channelFlags
	c := &cobra.Command{
		Use:   "upgrade [NAME...|--all]",
		Short: "Upgrade Machines to a release bundle, one at a time, going back on a failed step",
		Long: "A --bundle must be signed by a release key this CLI trusts: FILE.sig beside it, or the signed release.json of\n" +
			"its directory listing it (docs/releases.md); each Machine checks that signature again against its own keys.\n" +
			"Pushes the bundle to each Machine over Machine RPC; the Machine verifies it, installs it beside its\n" +
			"release and swaps store, daemon and plugins one unit at a time, health-checking each step. A failed step\n" +
			"puts that Machine back on its release and stops the rollout. Exit 3 when any Machine did not end upgraded.",
		RunE: func(c *cobra.Command, names []string) error {
			up, fromChannel, err := client.Upgrade{Names: names, All: all}.WithBundle(bundle, ch.Source != "" || ch.Channel != "")
			if err != nil {
				return err
			}
			if fromChannel {
				return runUpgrade(c, up, &ch, dryRun)
			}
			return runUpgrade(c, up, nil, dryRun)
		},
	}
	ch.add(c)
	c.Flags().BoolVar(&all, "all", false, "every Machine the Entry Machine observes")
	c.Flags().StringVar(&bundle, "bundle", "", "signed release bundle (default: the one of this CLI's version beside it, "+client.OwnBundle()+", else the channel's release)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	return c
}

// runUpgrade plans the rollout and prints it (--dry-run), or runs it
// with each step on stderr and prints the outcome (a table or --json);
// not every Machine upgraded exits 3. With ch, the release comes from
// the channel (the flags, else the context's): each Machine gets the
// verified bundle of its own arch.
func runUpgrade(c *cobra.Command, up client.Upgrade, ch *channelFlags, dryRun bool) error {
	return withClient(c, func(s *client.Session) error {
		name := filepath.Base(up.Bundle)
		if ch != nil {
			var err error
			if name, err = s.ChannelRelease(c.Context(), &up, ch.ReleaseSetting); err != nil {
				return err
			}
		}
		plan, err := s.PlanUpgrade(c.Context(), up)
		if err != nil {
			return err
		}
		if dryRun {
			return show(c, plan.Actions, nil, func(w io.Writer) error { return render.UpgradePlan(w, plan.Actions) })
		}
		o, err := s.ApplyUpgrade(c.Context(), plan, render.UpgradeHooks(progressTo(c), name))
		if g.json {
			if perr := printJSON(c.OutOrStdout(), o); perr != nil {
				return perr
			}
		} else {
			_ = render.UpgradeOutcome(c.OutOrStdout(), o)
		}
		return exitFor(err, g.json)
	})
}

// installDir is where `machine init/add` take the binaries they install
// on a Machine without Ployz (client.InstallDir): this CLI's bundle
// beside it, plus this CLI.
func installDir(progress func(string, ...any)) (string, func(), error) {
	self, _ := os.Executable()
	return client.InstallDir(client.ExecutableDir(), self, progress)
}
