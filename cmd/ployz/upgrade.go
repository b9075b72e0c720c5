package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/version"
)

// machineUpgrade is `ployz machine upgrade` (docs/upgrades.md).
func machineUpgrade() *cobra.Command {
	var all, dryRun bool
	var bundle string
	c := &cobra.Command{
		Use:   "upgrade [NAME...|--all]",
		Short: "Upgrade Machines to a release bundle, one at a time, going back on a failed step",
		Long: "Pushes the bundle to each Machine over Machine RPC; the Machine verifies it, installs it beside its\n" +
			"release and swaps store, daemon and plugins one unit at a time, health-checking each step. A failed step\n" +
			"puts that Machine back on its release and stops the rollout. Exit 3 when any Machine did not end upgraded.",
		RunE: func(c *cobra.Command, names []string) error {
			p, err := bundlePath(bundle)
			if err != nil {
				return err
			}
			m, err := release.OpenManifest(p)
			if err != nil {
				return fmt.Errorf("--bundle %s: %w", p, err)
			}
			if m.ProtocolMajor != version.ProtocolMajor {
				return fmt.Errorf("--bundle %s: protocol_major is %d, this CLI speaks %d; an upgrade never crosses a protocol major", p, m.ProtocolMajor, version.ProtocolMajor)
			}
			return runUpgrade(c, client.Upgrade{Bundle: p, Manifest: m, Names: names, All: all}, dryRun)
		},
	}
	c.Flags().BoolVar(&all, "all", false, "every Machine the Entry Machine observes")
	c.Flags().StringVar(&bundle, "bundle", "", "release bundle (default: the one of this CLI's version beside it, "+release.BundleName(version.Version, "linux", runtime.GOARCH)+")")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	return c
}

// bundlePath is --bundle, else this CLI's own version's bundle beside it.
func bundlePath(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	name := release.BundleName(version.Version, "linux", runtime.GOARCH)
	p := filepath.Join(executableDir(), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("--bundle: no %s beside this CLI; pass --bundle FILE (`make release` builds them into dist/)", name)
	}
	return p, nil
}

// runUpgrade plans the rollout and prints it (--dry-run), or runs it
// with each step on stderr and prints the outcome (a table or --json);
// not every Machine upgraded exits 3.
func runUpgrade(c *cobra.Command, up client.Upgrade, dryRun bool) error {
	return withClient(c, func(s *client.Session) error {
		plan, err := s.PlanUpgrade(c.Context(), up)
		if err != nil {
			return err
		}
		if dryRun {
			return printUpgradePlan(c, plan.Actions)
		}
		o, err := s.ApplyUpgrade(c.Context(), plan, upgradeHooks(progressTo(c), filepath.Base(up.Bundle)))
		if g.json {
			if perr := printJSON(c.OutOrStdout(), o); perr != nil {
				return perr
			}
		} else {
			printUpgradeOutcome(c, o)
		}
		return exitFor(err, g.json)
	})
}

// upgradeHooks print a rollout's pushes, steps and Machine outcomes.
func upgradeHooks(progress func(string, ...any), bundle string) client.UpgradeHooks {
	return client.UpgradeHooks{
		Pushing: func(a release.Action, over string) {
			if over != "" {
				progress("%s: pushing %s over SSH (%s; %s → %s)", a.Name, bundle, over, a.From, a.To)
				return
			}
			progress("%s: pushing %s (%s → %s)", a.Name, bundle, a.From, a.To)
		},
		Step: func(a release.Action, s rpc.UpgradeStep) {
			way := ""
			if s.Rollback {
				way = " (going back)"
			}
			progress("%s: %s → %s %s in %dms%s%s", a.Name, s.Name, s.Release, s.Outcome, s.Millis, way, suffix("", s.Detail))
		},
		Done: func(mo release.MachineOutcome) {
			progress("%s: %s%s (%.1fs)", mo.Name, mo.Outcome, suffix(mo.FailedStep, mo.Error), float64(mo.Millis)/1000)
		},
	}
}

func suffix(step, msg string) string {
	switch {
	case step != "":
		return fmt.Sprintf(" at step %s: %s", step, msg)
	case msg != "":
		return ": " + msg
	}
	return ""
}

func printUpgradePlan(c *cobra.Command, plan []release.Action) error {
	if g.json {
		return printJSON(c.OutOrStdout(), plan)
	}
	w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ORDER\tNAME\tID\tFROM\tTO\tACTION\tREASON")
	for i, a := range plan {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, a.Name, short(a.MachineID), a.From, a.To, a.Do, a.Reason)
	}
	return w.Flush()
}

func printUpgradeOutcome(c *cobra.Command, o release.Outcome) {
	w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tID\tFROM\tTO\tOUTCOME\tFAILED STEP\tTIME")
	for _, mo := range o.Machines {
		step := mo.FailedStep
		if step == "" {
			step = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%.1fs\n", mo.Name, short(mo.MachineID), mo.From, mo.To, mo.Outcome, step, float64(mo.Millis)/1000)
	}
	_ = w.Flush()
}

// installDir is where `machine init/add` take the binaries they install
// on a Machine without Ployz: the release bundle of this CLI's version
// (beside the CLI), unpacked into a temporary directory with
// every digest verified, plus this CLI when it runs on linux; without a
// bundle, the loose binaries beside the CLI (a development build, as in
// the lab), said so. cleanup removes the temporary directory.
func installDir(progress func(string, ...any)) (dir string, cleanup func(), err error) {
	none := func() {}
	p, err := bundlePath("")
	if err != nil {
		progress("no release bundle %s beside the CLI: installing the loose binaries of %s (a development build; `make release` builds bundles)",
			release.BundleName(version.Version, "linux", runtime.GOARCH), executableDir())
		return executableDir(), none, nil
	}
	tmp, err := os.MkdirTemp("", "ployz-install-")
	if err != nil {
		return "", none, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	f, err := os.Open(p)
	if err != nil {
		cleanup()
		return "", none, err
	}
	defer f.Close()
	m, err := release.Extract(f, filepath.Join(tmp, "r"), release.Target{OS: "linux", Arch: runtime.GOARCH, ProtocolMajor: version.ProtocolMajor})
	if err != nil {
		cleanup()
		return "", none, fmt.Errorf("install from %s: %w", p, err)
	}
	bin := filepath.Join(tmp, "r", "bin")
	if exe, err := os.Executable(); err == nil && runtime.GOOS == "linux" {
		if b, err := os.ReadFile(exe); err == nil {
			_ = os.WriteFile(filepath.Join(bin, "ployz"), b, 0o755)
		}
	}
	progress("installing Ployz %s from %s", m.Version, p)
	return bin, cleanup, nil
}
