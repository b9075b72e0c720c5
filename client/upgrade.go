package client

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
)

// Upgrade is a release bundle to roll out (docs/upgrades.md).
type Upgrade struct {
	// Bundle is the bundle's path; Manifest its opened manifest; Proof
	// what signs it (OpenSignedBundle), pushed with it for the Machine
	// to check.
	Bundle   string
	Manifest *release.Manifest
	Proof    *rpc.BundleProof
	// Names are the Machines to upgrade; All every one the entry observes.
	Names []string
	All   bool
	// Plugin, when set, upgrades only this plugin on every Machine.
	Plugin string
	// Release, when set instead of Bundle, is a verified release from a
	// channel: each Machine gets that release's bundle for its own arch,
	// fetched once per arch. Manifest then only names the version.
	Release *release.Release
}

// UpgradePlan is a rollout's order, for the caller to show before
// ApplyUpgrade runs it.
type UpgradePlan struct {
	Actions []release.Action
	up      Upgrade
	conns   map[string]operator.Connection // by Machine id, for ssh actions
	// bundles are a channel release's fetched bundles, by arch.
	bundles *archBundles
}

// UpgradeHooks hear a rollout as it goes; every field may be nil.
type UpgradeHooks struct {
	// Pushing hears a bundle pushed to a Machine (over is the SSH URL of
	// an upgrade through the shell, "" over Machine RPC).
	Pushing func(a release.Action, over string)
	// Step hears each step of a Machine's swap as it reports it.
	Step func(a release.Action, s rpc.UpgradeStep)
	// Done hears each Machine's outcome.
	Done func(release.MachineOutcome)
}

// PlanUpgrade orders the Machines' upgrade to the bundle (a Machine whose
// release cannot take it over Machine RPC is upgraded over the context's
// SSH connection to it), or, with Plugin, the plugin's.
func (s *Session) PlanUpgrade(ctx context.Context, up Upgrade) (*UpgradePlan, error) {
	var list rpc.MachineList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListMachines, rpc.None{}, &list); err != nil {
		return nil, err
	}
	p := &UpgradePlan{up: up}
	var err error
	if up.Release != nil {
		p.up.Manifest = &release.Manifest{Version: up.Release.Index.Version}
		up.Manifest = p.up.Manifest
		p.bundles = &archBundles{r: up.Release, bundles: map[string]release.Bundle{}}
	}
	if up.Plugin != "" {
		p.Actions, err = release.PlanPlugin(s.pluginTargets(ctx, list.Machines), up.Manifest, up.Plugin)
		return p, err
	}
	if p.Actions, err = release.Plan(list.Machines, up.Manifest, up.Names, up.All); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(p.Actions, func(a release.Action) bool { return a.Missing != "" }) {
		p.conns = s.sshConnections(ctx)
		urls := map[string]string{}
		for id, conn := range p.conns {
			urls[id] = conn.URL
		}
		release.OverSSH(p.Actions, urls)
	}
	return p, nil
}

// pluginTargets inspects every Machine for its plugins.
func (s *Session) pluginTargets(ctx context.Context, ms []rpc.MachineView) []release.PluginTarget {
	targets := make([]release.PluginTarget, 0, len(ms))
	for _, v := range ms {
		t := release.PluginTarget{Machine: v}
		var in rpc.Inspection
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := rpc.InvokeInto(cctx, s.ent, rpc.Target{One: v.ID}, rpc.Inspect, rpc.None{}, &in); err != nil {
			t.InspectErr = err.Error()
		} else {
			t.Inspection = &in
		}
		cancel()
		targets = append(targets, t)
	}
	return targets
}

// ApplyUpgrade runs the plan Machine by Machine; a failed step puts that
// Machine back on its release and stops the rollout. When not every
// Machine ended upgraded it returns the outcome with a *PartialError.
func (s *Session) ApplyUpgrade(ctx context.Context, p *UpgradePlan, h UpgradeHooks) (release.Outcome, error) {
	defer p.bundles.close()
	o := release.Rollout(ctx, p.Actions, func(ctx context.Context, a release.Action) release.MachineOutcome {
		if a.Do == "ssh" {
			return s.upgradeSSH(ctx, p, a, h)
		}
		return s.upgradeOne(ctx, p, a, h)
	}, func(mo release.MachineOutcome) {
		if h.Done != nil {
			h.Done(mo)
		}
	})
	if !o.Partial() {
		return o, nil
	}
	if p.up.Plugin != "" {
		return o, partial(fmt.Errorf("plugin upgrade: not every Machine runs %s from %s", p.up.Plugin, p.up.Manifest.Version))
	}
	return o, partial(fmt.Errorf("machine upgrade: not every Machine runs %s", p.up.Manifest.Version))
}

func (h UpgradeHooks) pushing(a release.Action, over string) {
	if h.Pushing != nil {
		h.Pushing(a, over)
	}
}

func (h UpgradeHooks) steps(a release.Action) func(rpc.UpgradeStep) {
	return func(st rpc.UpgradeStep) {
		if h.Step != nil {
			h.Step(a, st)
		}
	}
}

// upgradeOne pushes the bundle to one Machine and follows its swap (of
// only the plugin when the upgrade names one).
func (s *Session) upgradeOne(ctx context.Context, p *UpgradePlan, a release.Action, h UpgradeHooks) release.MachineOutcome {
	mo := release.MachineOutcome{MachineID: a.MachineID, Name: a.Name, From: a.From, To: a.To, Outcome: release.OutcomeFailed}
	b, err := s.bundleFor(ctx, p, a)
	if err != nil {
		mo.Outcome, mo.FailedStep, mo.Error = release.OutcomeRefused, "fetch", err.Error()
		return mo
	}
	h.pushing(a, "")
	push := release.Push
	if plugin := p.up.Plugin; plugin != "" {
		push = func(ctx context.Context, c release.Caller, id string, b release.Bundle) (rpc.UpgradeStarted, error) {
			return release.PushPlugin(ctx, c, id, b, plugin)
		}
	}
	started, err := push(ctx, s.ent, a.MachineID, b)
	if err != nil {
		// Nothing changed on the Machine: it refused or never got the bundle.
		mo.Outcome, mo.FailedStep, mo.Error = release.OutcomeRefused, "push", err.Error()
		return mo
	}
	st, err := release.Await(ctx, s.ent, a.MachineID, started.ID, 10*time.Minute, h.steps(a))
	if p.up.Plugin == "" {
		mo.From = started.From
	}
	return finish(mo, st, err)
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

// sshConnections maps each Machine the context reaches over ssh:// to that
// connection, by asking each who it is (a context lists URLs, not ids).
func (s *Session) sshConnections(ctx context.Context) map[string]operator.Connection {
	out := map[string]operator.Connection{}
	oc, err := ContextOf(s.st, Options{Context: s.name})
	if err != nil {
		return out
	}
	for _, conn := range oc.Connections {
		if !strings.HasPrefix(conn.URL, "ssh://") {
			continue
		}
		c, err := operator.Dial(ctx, conn, s.opts.Dial)
		if err != nil {
			continue
		}
		var in rpc.Inspection
		if err := rpc.InvokeInto(ctx, c, rpc.Target{}, rpc.Inspect, rpc.None{}, &in); err == nil && in.ID != "" {
			out[in.ID] = conn
		}
		c.Close()
	}
	return out
}

// upgradeSSH upgrades a Machine whose release has no upgrade route over
// SSH: the same bundle checks and the same swap, started and followed
// through the shell instead of Machine RPC.
func (s *Session) upgradeSSH(ctx context.Context, p *UpgradePlan, a release.Action, h UpgradeHooks) release.MachineOutcome {
	mo := release.MachineOutcome{MachineID: a.MachineID, Name: a.Name, From: a.From, To: a.To, Outcome: release.OutcomeRefused, FailedStep: "push"}
	b, err := s.bundleFor(ctx, p, a)
	if err != nil {
		mo.FailedStep, mo.Error = "fetch", err.Error()
		return mo
	}
	conn := p.conns[a.MachineID]
	sh, done, err := s.sshShell(ctx, conn)
	if err != nil {
		mo.Error = err.Error()
		return mo
	}
	defer done()
	h.pushing(a, conn.URL)
	id, err := release.PushSSH(ctx, sh, b, a.From)
	if err != nil {
		mo.Error = err.Error()
		return mo
	}
	mo.Outcome, mo.FailedStep = release.OutcomeFailed, ""
	st, err := release.AwaitSSH(ctx, sh, id, 10*time.Minute, h.steps(a))
	return finish(mo, st, err)
}

// sshShell opens one SSH connection to conn and runs commands on it; the
// Session's SSH key, when set, is used over the connection's.
func (s *Session) sshShell(ctx context.Context, conn operator.Connection) (release.Shell, func(), error) {
	u, err := url.Parse(conn.URL)
	if err != nil {
		return nil, nil, err
	}
	key := conn.SSHKey
	if s.opts.SSHKey != "" {
		key = s.opts.SSHKey
	}
	t, err := rpc.NewSSHTunnel(u, s.opts.Dial.SSH(key))
	if err != nil {
		return nil, nil, err
	}
	sc, err := t.Client(ctx)
	if err != nil {
		t.Close()
		return nil, nil, err
	}
	sh := func(_ context.Context, cmd string, stdin io.Reader) (string, error) {
		ss, err := sc.NewSession()
		if err != nil {
			return "", err
		}
		defer ss.Close()
		ss.Stdin = stdin
		out, err := ss.CombinedOutput(cmd)
		return string(out), err
	}
	return sh, func() { t.Close() }, nil
}

// bundleFor is the bundle a Machine gets: the plan's one, or from a
// channel release the one for the Machine's arch (as its daemon reports
// it), fetched and verified on first need.
func (s *Session) bundleFor(ctx context.Context, p *UpgradePlan, a release.Action) (release.Bundle, error) {
	if p.bundles == nil {
		return release.Bundle{Path: p.up.Bundle, Manifest: p.up.Manifest, Proof: p.up.Proof}, nil
	}
	var in rpc.Inspection
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := rpc.InvokeInto(cctx, s.ent, rpc.Target{One: a.MachineID}, rpc.Inspect, rpc.None{}, &in); err != nil {
		return release.Bundle{}, fmt.Errorf("machine %s: which arch it runs: %w", a.Name, err)
	}
	if in.Arch == "" {
		return release.Bundle{}, fmt.Errorf("machine %s: its release (%s) does not say its arch; upgrade it with --bundle", a.Name, in.DaemonVersion)
	}
	if in.OS != "" && in.OS != "linux" {
		return release.Bundle{}, fmt.Errorf("machine %s runs %s/%s; releases are built for linux", a.Name, in.OS, in.Arch)
	}
	return p.bundles.get(ctx, in.Arch)
}

// archBundles are one channel release's fetched bundles so far, by
// arch, in a temporary directory removed when the rollout ends. Each is
// pushed with the release's signed index, which lists it.
type archBundles struct {
	r       *release.Release
	dir     string
	bundles map[string]release.Bundle
}

func (b *archBundles) get(ctx context.Context, arch string) (release.Bundle, error) {
	if got, ok := b.bundles[arch]; ok {
		return got, nil
	}
	if b.dir == "" {
		d, err := os.MkdirTemp("", "ployz-upgrade-")
		if err != nil {
			return release.Bundle{}, err
		}
		b.dir = d
	}
	p, m, err := FetchBundle(ctx, b.r, arch, b.dir)
	if err != nil {
		return release.Bundle{}, err
	}
	b.bundles[arch] = release.Bundle{Path: p, Manifest: m, Proof: b.r.Proof()}
	return b.bundles[arch], nil
}

func (b *archBundles) close() {
	if b != nil && b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// WithBundle sets up's release to a signed bundle: the one named, else
// this CLI's own beside it (ExecutableDir). fromChannel says the release
// comes from a channel instead (ChannelRelease): when channel flags are
// given without a bundle, or no bundle was named and none lies beside
// the CLI.
func (up Upgrade) WithBundle(named string, channelFlags bool) (out Upgrade, fromChannel bool, err error) {
	if named == "" && channelFlags {
		return up, true, nil
	}
	p, err := BundlePath(named, ExecutableDir())
	if err != nil && named == "" {
		return up, true, nil
	}
	if err != nil {
		return up, false, err
	}
	b, _, err := OpenSignedBundle(p)
	if err != nil {
		return up, false, err
	}
	up.Bundle, up.Manifest, up.Proof = b.Path, b.Manifest, b.Proof
	return up, false, nil
}

// ChannelRelease sets up's release to the latest verified release of
// the channel flags pick (PickChannel, the Session's context's setting
// between the flags and the environment) and names it for the rollout's
// progress.
func (s *Session) ChannelRelease(ctx context.Context, up *Upgrade, flags operator.ReleaseSetting) (name string, err error) {
	rc, ok, err := s.SavedChannel(flags)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("--bundle: no %s beside the CLI, and no release source (--release-source, `ployz ctx release`, $%s)", OwnBundle(), EnvReleaseSource)
	}
	if up.Release, err = rc.Latest(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s (%s, key %s)", rc.Channel, up.Release.Index.Version, rc.Source, up.Release.KeyID), nil
}
