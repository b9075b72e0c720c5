package upgrade

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/mesh"
	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/store"
)

// ApplyConfig is one swap onto a staged release (`ployzd upgrade apply`).
type ApplyConfig struct {
	ID, From, To string
	DataDir      string // /var/lib/ployz; releases live in DataDir/releases
	BinDir       string // /usr/local/bin, where the units find ployzd
	UnitDir      string // /etc/systemd/system
	Socket       string // the local Machine RPC socket
	StoreSocket  string // the store API's socket (default /run/ployz/store/api.sock)
	// Plugin, when set, swaps only this bundled plugin onto release To's
	// binary (`ployz plugin upgrade`); store, daemon and the other
	// plugins keep running as they are.
	Plugin string
	Log    hclog.Logger
	// StepTimeout bounds each health check (default 60s).
	StepTimeout time.Duration
}

// Apply swaps this Machine onto release cfg.To one unit at a time,
// health-checking each step, and on a failed step puts the Machine back on
// cfg.From the same way (Replacement Compensation, design bet 4). The
// status file says what happened step by step.
func Apply(ctx context.Context, cfg ApplyConfig) error {
	if cfg.StepTimeout == 0 {
		cfg.StepTimeout = 60 * time.Second
	}
	if cfg.StoreSocket == "" {
		cfg.StoreSocket = "/run/ployz/store/api.sock"
	}
	a := &applier{cfg: cfg, root: filepath.Join(cfg.DataDir, "releases")}
	a.st = rpc.UpgradeStatus{ID: cfg.ID, From: cfg.From, To: cfg.To, Plugin: cfg.Plugin, State: rpc.UpgradeRunning, Started: time.Now().UnixMilli()}
	if prev, err := ReadStatus(a.root); err == nil && prev.ID == cfg.ID {
		a.st.Started = prev.Started
	}
	a.save()
	err := a.run(ctx)
	a.st.Ended = time.Now().UnixMilli()
	a.save()
	return err
}

type applier struct {
	cfg    ApplyConfig
	root   string
	st     rpc.UpgradeStatus
	before rpc.Inspection
	// rollback is true while the applier puts the previous release back.
	rollback bool
	// plugin is set for a one-plugin upgrade (cfg.Plugin).
	plugin *pluginSwap
	// overrides are the plugin overrides a whole-Machine upgrade removes,
	// by plugin name, restored on its way back.
	overrides map[string]string
}

func (a *applier) save() {
	if err := WriteStatus(a.root, a.st); err != nil {
		a.cfg.Log.Error("upgrade status not written", "error", err)
	}
}

func (a *applier) run(ctx context.Context) error {
	var err error
	if a.before, err = a.inspect(ctx, "", 15*time.Second); err != nil {
		return a.abort("inspect", fmt.Errorf("the running daemon does not answer: %w", err))
	}
	if err := a.adopt(); err != nil {
		return a.abort("adopt", err)
	}
	if a.cfg.Plugin != "" {
		if err := a.preparePlugin(); err != nil {
			return a.abort("prepare", err)
		}
	} else {
		a.overrides = readOverrides(a.cfg.DataDir)
	}
	failed, err := a.swap(ctx, a.cfg.To)
	if err == nil {
		a.st.State = rpc.UpgradeDone
		if a.cfg.Plugin == "" {
			a.prune()
		}
		return nil
	}
	a.st.Failed, a.st.Error = failed, err.Error()
	a.cfg.Log.Error("upgrade step failed; putting the previous release back", "step", failed, "error", err)
	a.rollback = true
	if _, rerr := a.swap(ctx, a.cfg.From); rerr != nil {
		a.st.State = rpc.UpgradeFailed
		a.st.Error += "; the way back failed too: " + rerr.Error()
		return fmt.Errorf("%s; rollback: %w", err, rerr)
	}
	a.st.State = rpc.UpgradeRolledBack
	return err
}

// prune removes every release but the current one (To) and the one the
// way back needs (From): a Machine keeps two releases, not all it ran.
func (a *applier) prune() {
	entries, err := os.ReadDir(a.root)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || n == a.cfg.To || n == a.cfg.From || strings.HasPrefix(n, ".") {
			continue
		}
		if err := os.RemoveAll(filepath.Join(a.root, n)); err != nil {
			a.cfg.Log.Warn("old release not removed", "release", n, "error", err)
			continue
		}
		a.cfg.Log.Info("old release removed", "release", n)
	}
}

// abort ends an upgrade that failed before anything changed.
func (a *applier) abort(step string, err error) error {
	a.record(step, a.cfg.To, time.Now(), err)
	a.st.State, a.st.Failed, a.st.Error = rpc.UpgradeRolledBack, step, err.Error()
	return err
}

func (a *applier) record(name, rel string, start time.Time, err error) {
	s := rpc.UpgradeStep{Name: name, Release: rel, Outcome: "ok", Millis: time.Since(start).Milliseconds(), Rollback: a.rollback}
	if err != nil {
		s.Outcome, s.Detail = "failed", err.Error()
	}
	a.st.Steps = append(a.st.Steps, s)
	a.save()
	a.cfg.Log.Info("upgrade step", "step", name, "release", rel, "outcome", s.Outcome, "ms", s.Millis, "detail", s.Detail)
}

// swap moves the Machine onto release v: links, store, daemon, plugins,
// then the data plane. It returns the failed step's name.
// A one-plugin upgrade switches only that plugin, then checks the same
// way.
func (a *applier) swap(ctx context.Context, v string) (string, error) {
	type step struct {
		name string
		fn   func(context.Context, string) error
	}
	steps := []step{
		{"switch", a.switchLinks},
		{"store", a.restartStore},
		{"daemon", a.restartDaemon},
		{"wireguard", a.restartWireGuard},
		{"plugins", a.waitPlugins},
		{"dns", a.checkDNS},
		{"ingress", a.checkIngress},
	}
	if a.plugin != nil {
		steps = append([]step{{"switch", a.switchPlugin}}, steps[4:]...)
	}
	for _, s := range steps {
		start := time.Now()
		err := s.fn(ctx, v)
		a.record(s.name, v, start, err)
		if err != nil {
			return s.name, err
		}
	}
	return "", nil
}

// adopt makes the running release a directory under releases, so the way
// back exists before anything changes: a Machine installed from loose
// binaries gets them copied into releases/<from>.
func (a *applier) adopt() error {
	dir := filepath.Join(a.root, a.cfg.From)
	if _, err := os.Stat(filepath.Join(dir, "bin", "ployzd")); err == nil {
		return nil
	}
	tmp := dir + ".partial"
	_ = os.RemoveAll(tmp)
	for _, b := range release.Binaries {
		src := filepath.Join(a.cfg.BinDir, b)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := copyFile(src, filepath.Join(tmp, "bin", b), 0o755); err != nil {
			return fmt.Errorf("keep release %s: %w", a.cfg.From, err)
		}
	}
	units, _ := filepath.Glob(filepath.Join(a.cfg.UnitDir, "ployz*.service"))
	for _, u := range units {
		if err := copyFile(u, filepath.Join(tmp, "systemd", filepath.Base(u)), 0o644); err != nil {
			return fmt.Errorf("keep release %s: %w", a.cfg.From, err)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "bin", "ployzd")); err != nil {
		return fmt.Errorf("keep release %s: no ployzd in %s", a.cfg.From, a.cfg.BinDir)
	}
	return os.Rename(tmp, dir)
}

func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src) // follows a symlink: the content is what counts
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// switchLinks points releases/current at v, each binary in BinDir at
// current/bin, and installs v's units (each by rename, so no reader ever
// sees a half-written file).
func (a *applier) switchLinks(ctx context.Context, v string) error {
	dir := filepath.Join(a.root, v)
	if _, err := os.Stat(filepath.Join(dir, "bin", "ployzd")); err != nil {
		return fmt.Errorf("release %s is not staged: %w", v, err)
	}
	if err := symlinkAtomic(v, filepath.Join(a.root, "current")); err != nil {
		return err
	}
	bins, _ := os.ReadDir(filepath.Join(dir, "bin"))
	for _, b := range bins {
		target := filepath.Join(a.root, "current", "bin", b.Name())
		if err := symlinkAtomic(target, filepath.Join(a.cfg.BinDir, b.Name())); err != nil {
			return err
		}
	}
	if err := a.switchOverrides(v); err != nil {
		return err
	}
	units, _ := filepath.Glob(filepath.Join(dir, "systemd", "*.service"))
	for _, u := range units {
		dst := filepath.Join(a.cfg.UnitDir, filepath.Base(u))
		if err := copyFile(u, dst+".new", 0o644); err != nil {
			return err
		}
		if err := os.Rename(dst+".new", dst); err != nil {
			return err
		}
	}
	return a.systemctl(ctx, "daemon-reload")
}

func symlinkAtomic(target, link string) error {
	tmp := link + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

func (a *applier) systemctl(ctx context.Context, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, a.cfg.StepTimeout)
	defer cancel()
	out, err := exec.CommandContext(cctx, "systemctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// restartStore restarts the replicated store onto v's ployzd and waits for
// its API. A Machine whose store is not running (not yet in a Cluster)
// skips it.
func (a *applier) restartStore(ctx context.Context, v string) error {
	if a.systemctl(ctx, "is-active", "--quiet", "ployz-store.service") != nil {
		return nil
	}
	if err := a.systemctl(ctx, "restart", "ployz-store.service"); err != nil {
		return err
	}
	return a.poll(ctx, "the store API on "+a.cfg.StoreSocket, a.storeAnswers)
}

// storeAnswers asks the store's socket for its health. A release from
// before the socket (a way back) serves TCP only; its port accepting is
// taken as the answer then. Nothing, no token either, is sent to it.
func (a *applier) storeAnswers() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := store.New(a.cfg.StoreSocket).Health(ctx)
	if err == nil {
		return nil
	}
	c, terr := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(feature.StoreAPIPort), time.Second)
	if terr != nil {
		return err
	}
	c.Close()
	return nil
}

// restartDaemon restarts ployz.service and waits until it answers as v.
func (a *applier) restartDaemon(ctx context.Context, v string) error {
	if err := a.systemctl(ctx, "restart", "ployz.service"); err != nil {
		return err
	}
	_, err := a.inspect(ctx, v, a.cfg.StepTimeout)
	return err
}

// restartWireGuard restarts the userspace mesh device onto v's ployzd (a
// kernel interface has no process to swap) and waits until the device
// holds its key, every peer and every address it held before: the TUN
// kept in the fd store and the peers handed over keep the mesh carrying
// traffic, and the daemon restores whatever a successor lacks.
func (a *applier) restartWireGuard(ctx context.Context, _ string) error {
	if a.systemctl(ctx, "is-active", "--quiet", feature.WireGuardUnit) != nil {
		return nil
	}
	before, err := mesh.ReadDevice(mesh.DefaultInterface)
	if err != nil {
		return err
	}
	if err := a.systemctl(ctx, "restart", feature.WireGuardUnit); err != nil {
		return err
	}
	return a.poll(ctx, "the mesh device "+mesh.DefaultInterface, func() error {
		after, err := mesh.ReadDevice(mesh.DefaultInterface)
		if err != nil {
			return err
		}
		if why := before.Whole(after); why != "" {
			return errors.New(why)
		}
		if after.Index != before.Index {
			a.cfg.Log.Info("wireguard: the interface was recreated (the previous process did not keep its TUN); restored by ployzd")
		}
		return nil
	})
}

// finalError ends a poll at once: the condition cannot come true.
type finalError struct{ err error }

func (e *finalError) Error() string { return e.err.Error() }
func (e *finalError) Unwrap() error { return e.err }

func (a *applier) poll(ctx context.Context, what string, f func() error) error {
	deadline := time.Now().Add(a.cfg.StepTimeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		var final *finalError
		if errors.As(err, &final) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready after %s: %w", what, a.cfg.StepTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// inspect asks the local daemon for its inspection, until it answers as
// version want (any version when want is empty).
func (a *applier) inspect(ctx context.Context, want string, timeout time.Duration) (rpc.Inspection, error) {
	var in rpc.Inspection
	deadline := time.Now().Add(timeout)
	for {
		err := a.inspectOnce(ctx, &in)
		if err == nil && want != "" && in.DaemonVersion != want {
			err = fmt.Errorf("ployzd answers as %s, want %s", in.DaemonVersion, want)
		}
		if err == nil {
			return in, nil
		}
		if time.Now().After(deadline) {
			return in, fmt.Errorf("ployzd on %s: %w", a.cfg.Socket, err)
		}
		select {
		case <-ctx.Done():
			return in, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (a *applier) inspectOnce(ctx context.Context, in *rpc.Inspection) error {
	c, err := rpc.DialUnix(a.cfg.Socket)
	if err != nil {
		return err
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return rpc.InvokeInto(cctx, c, rpc.Target{}, rpc.Inspect, rpc.None{}, in)
}

// waitPlugins waits until every plugin release v ships runs v's binary,
// healthy, with its capabilities advertised again. A plugin that was not
// healthy before the upgrade only has to be installed.
func (a *applier) waitPlugins(ctx context.Context, v string) error {
	want := map[string]string{}
	for name, b := range a.pluginBinaries(v) {
		d, err := release.FileDigest(b)
		if err != nil {
			return err
		}
		want[name] = d
	}
	return a.poll(ctx, "plugins on release "+v, func() error {
		var in rpc.Inspection
		if err := a.inspectOnce(ctx, &in); err != nil {
			return err
		}
		return pluginsOn(a.before, in, want)
	})
}

// pluginsOn checks in against the plugins' wanted digests; a plugin healthy
// in before must be healthy again with every capability it had.
func pluginsOn(before, in rpc.Inspection, want map[string]string) error {
	for _, p := range in.Plugins {
		d, ok := want[p.Name]
		if !ok {
			continue
		}
		if p.SHA256 != d {
			return fmt.Errorf("plugin %s: installed %.12s, want %.12s", p.Name, p.SHA256, d)
		}
		var old *rpc.PluginView
		for i := range before.Plugins {
			if before.Plugins[i].Name == p.Name {
				old = &before.Plugins[i]
			}
		}
		if old == nil || old.Health != "healthy" {
			continue
		}
		if p.Health == "refused" {
			// The host will not run the new binary: waiting cannot help.
			return &finalError{fmt.Errorf("plugin %s: refused%s", p.Name, feature.ErrSuffix(p.Error))}
		}
		if p.RunningSHA256 != "" && p.SwitchError != "" {
			// The old binary keeps serving and the host will not try again.
			return &finalError{fmt.Errorf("plugin %s: %s", p.Name, p.SwitchError)}
		}
		if p.Health != "healthy" || p.RunningSHA256 != "" {
			return fmt.Errorf("plugin %s: %s%s", p.Name, p.Health, feature.ErrSuffix(p.Error))
		}
		for _, c := range old.Capabilities {
			if !slices.Contains(in.Capabilities, c) {
				return fmt.Errorf("plugin %s: capability %s is not advertised again", p.Name, c)
			}
		}
	}
	return nil
}

func (a *applier) pluginWasHealthy(name string) bool {
	for _, p := range a.before.Plugins {
		if p.Name == name {
			return p.Health == "healthy"
		}
	}
	return false
}

// checkDNS asks Internal DNS on the Machine's gateway; any answer counts,
// a timeout does not.
func (a *applier) checkDNS(ctx context.Context, _ string) error {
	if !a.pluginWasHealthy("dns") || a.before.Subnet == "" {
		return nil
	}
	p, err := netip.ParsePrefix(a.before.Subnet)
	if err != nil {
		return err
	}
	server := net.JoinHostPort(p.Masked().Addr().Next().String(), "53")
	return a.poll(ctx, "Internal DNS on "+server, func() error { return dnsAnswers(server) })
}

// dnsAnswers sends one A query over UDP and accepts any reply to it. The
// query is built by hand: ployzd links no DNS library (deps_test.go).
func dnsAnswers(server string) error {
	c, err := net.DialTimeout("udp", server, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	q := []byte{0x50, 0x7a, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, label := range []string{"ployz-upgrade-check", "internal"} {
		q = append(append(q, byte(len(label))), label...)
	}
	q = append(q, 0, 0, 1, 0, 1) // root, type A, class IN
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(q); err != nil {
		return err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if n < 12 || buf[0] != q[0] || buf[1] != q[1] || buf[2]&0x80 == 0 {
		return errors.New("not a DNS reply to the query")
	}
	return nil
}

// checkIngress sends one request to the Ingress Proxy on port 80; any HTTP
// answer counts.
func (a *applier) checkIngress(ctx context.Context, _ string) error {
	if !a.pluginWasHealthy("ingress-caddy") {
		return nil
	}
	return a.poll(ctx, "the Ingress Proxy on 127.0.0.1:80", func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:80", 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: ployz-upgrade-check.invalid\r\n\r\n"); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, "HTTP/") {
			return errors.New("not an HTTP answer: " + strings.TrimSpace(line))
		}
		return nil
	})
}
