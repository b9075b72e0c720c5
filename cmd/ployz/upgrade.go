package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/operator"
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
			return withSession(c, func(s session) error {
				return runUpgrade(c, s, p, m, names, all, dryRun)
			})
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

func runUpgrade(c *cobra.Command, s session, p string, m *release.Manifest, names []string, all, dryRun bool) error {
	ctx, ent := c.Context(), s.ent
	var list rpc.MachineList
	if err := ent.Call(ctx, rpc.Target{}, rpc.CmdListMachines, nil, &list); err != nil {
		return err
	}
	plan, err := release.Plan(list.Machines, m, names, all)
	if err != nil {
		return err
	}
	var conns map[string]operator.Connection
	if slices.ContainsFunc(plan, func(a release.Action) bool { return a.Missing != "" }) {
		conns = sshConnections(ctx, s.st, s.ctx)
		urls := map[string]string{}
		for id, conn := range conns {
			urls[id] = conn.URL
		}
		release.OverSSH(plan, urls)
	}
	if dryRun {
		return printUpgradePlan(c, plan)
	}
	progress := progressTo(c)
	return rollout(c, plan, func(ctx context.Context, a release.Action) release.MachineOutcome {
		if a.Do == "ssh" {
			return upgradeSSH(ctx, conns[a.MachineID], p, m, a, progress)
		}
		return upgradeOne(ctx, ent, p, m, a, "", progress)
	}, "machine upgrade: not every Machine runs "+m.Version)
}

// rollout runs plan Machine by Machine with upgrade, prints the outcome
// (a table or --json) and returns exit 3 with partial when not every
// Machine ended upgraded.
func rollout(c *cobra.Command, plan []release.Action, upgrade release.UpgradeFunc, partial string) error {
	progress := progressTo(c)
	o := release.Rollout(c.Context(), plan, upgrade, func(mo release.MachineOutcome) {
		progress("%s: %s%s (%.1fs)", mo.Name, mo.Outcome, suffix(mo.FailedStep, mo.Error), float64(mo.Millis)/1000)
	})
	if g.json {
		if err := printJSON(c.OutOrStdout(), o); err != nil {
			return err
		}
	} else {
		printUpgradeOutcome(c, o)
	}
	if o.Partial() {
		return &exitError{code: 3, err: errors.New(partial), silent: g.json}
	}
	return nil
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

// upgradeOne pushes the bundle to one Machine and follows its swap (of
// only plugin when set).
func upgradeOne(ctx context.Context, ent *rpc.Client, p string, m *release.Manifest, a release.Action, plugin string, progress func(string, ...any)) release.MachineOutcome {
	mo := release.MachineOutcome{MachineID: a.MachineID, Name: a.Name, From: a.From, To: a.To, Outcome: release.OutcomeFailed}
	progress("%s: pushing %s (%s → %s)", a.Name, filepath.Base(p), a.From, a.To)
	push := release.Push
	if plugin != "" {
		push = func(ctx context.Context, c release.Caller, id, p string, m *release.Manifest) (rpc.UpgradeStarted, error) {
			return release.PushPlugin(ctx, c, id, p, m, plugin)
		}
	}
	started, err := push(ctx, ent, a.MachineID, p, m)
	if err != nil {
		// Nothing changed on the Machine: it refused or never got the bundle.
		mo.Outcome, mo.FailedStep, mo.Error = release.OutcomeRefused, "push", err.Error()
		return mo
	}
	st, err := release.Await(ctx, ent, a.MachineID, started.ID, 10*time.Minute, stepPrinter(a, progress))
	if plugin == "" {
		mo.From = started.From
	}
	return finish(mo, st, err)
}

// stepPrinter prints each step of a Machine's swap as it is reported.
func stepPrinter(a release.Action, progress func(string, ...any)) func(rpc.UpgradeStep) {
	return func(s rpc.UpgradeStep) {
		way := ""
		if s.Rollback {
			way = " (going back)"
		}
		progress("%s: %s → %s %s in %dms%s%s", a.Name, s.Name, s.Release, s.Outcome, s.Millis, way, suffix("", s.Detail))
	}
}

// finish reads a swap's end into the Machine's outcome.
func finish(mo release.MachineOutcome, st rpc.UpgradeStatus, err error) release.MachineOutcome {
	mo.Steps, mo.FailedStep = st.Steps, st.Failed
	if err != nil {
		mo.Error = err.Error()
		return mo
	}
	switch st.State {
	case rpc.UpgradeDone:
		mo.Outcome = release.OutcomeUpgraded
	case rpc.UpgradeRolledBack:
		mo.Outcome, mo.Error = release.OutcomeRolledBack, st.Error
	default:
		mo.Error = st.Error
	}
	return mo
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

// sshConnections maps each Machine the context reaches over ssh:// to that
// connection, by asking each who it is (a context lists URLs, not ids).
func sshConnections(ctx context.Context, st *operator.Store, name string) map[string]operator.Connection {
	out := map[string]operator.Connection{}
	oc, err := operator.Resolve(st, name)
	if err != nil {
		return out
	}
	for _, conn := range oc.Connections {
		if !strings.HasPrefix(conn.URL, "ssh://") {
			continue
		}
		c, err := operator.Dial(ctx, conn, g.dialOptions())
		if err != nil {
			continue
		}
		var in rpc.Inspection
		if err := c.Call(ctx, rpc.Target{}, rpc.CmdInspect, nil, &in); err == nil && in.ID != "" {
			out[in.ID] = conn
		}
		c.Close()
	}
	return out
}

// upgradeSSH upgrades a Machine whose release has no upgrade route over
// SSH: the same bundle checks and the same swap, started and followed
// through the shell instead of Machine RPC.
func upgradeSSH(ctx context.Context, conn operator.Connection, p string, m *release.Manifest, a release.Action, progress func(string, ...any)) release.MachineOutcome {
	mo := release.MachineOutcome{MachineID: a.MachineID, Name: a.Name, From: a.From, To: a.To, Outcome: release.OutcomeRefused, FailedStep: "push"}
	sh, done, err := sshShell(ctx, conn)
	if err != nil {
		mo.Error = err.Error()
		return mo
	}
	defer done()
	progress("%s: pushing %s over SSH (%s; %s → %s)", a.Name, filepath.Base(p), conn.URL, a.From, a.To)
	id, err := release.PushSSH(ctx, sh, p, m, a.From)
	if err != nil {
		mo.Error = err.Error()
		return mo
	}
	mo.Outcome, mo.FailedStep = release.OutcomeFailed, ""
	st, err := release.AwaitSSH(ctx, sh, id, 10*time.Minute, stepPrinter(a, progress))
	return finish(mo, st, err)
}

// sshShell opens one SSH connection to conn and runs commands on it.
func sshShell(ctx context.Context, conn operator.Connection) (release.Shell, func(), error) {
	u, err := url.Parse(conn.URL)
	if err != nil {
		return nil, nil, err
	}
	key := conn.SSHKey
	if g.sshKey != "" {
		key = g.sshKey
	}
	t, err := rpc.NewSSHTunnel(u, g.dialOptions().SSH(key))
	if err != nil {
		return nil, nil, err
	}
	sc, err := t.Client(ctx)
	if err != nil {
		t.Close()
		return nil, nil, err
	}
	sh := func(_ context.Context, cmd string, stdin io.Reader) (string, error) {
		s, err := sc.NewSession()
		if err != nil {
			return "", err
		}
		defer s.Close()
		s.Stdin = stdin
		out, err := s.CombinedOutput(cmd)
		return string(out), err
	}
	return sh, func() { t.Close() }, nil
}
