package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/internal/version"
)

// devReleaseKey is the release key `make build` made beside the lab's
// binaries (DEV_RELEASE_KEY), which they trust: the lab signs the
// bundles it builds with it, so every --bundle takes the signed path.
func devReleaseKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	p := filepath.Join(os.Getenv(lab.EnvBinDir), "dev-release.key")
	k, err := release.LoadPrivateKey(p)
	if err != nil {
		t.Fatalf("the development release key `make build` writes beside the binaries: %v", err)
	}
	return k
}

// signBundle writes p.sig, p's signature by the development key.
func signBundle(t *testing.T, p string) {
	t.Helper()
	if err := release.SignBundle(p, devReleaseKey(t)); err != nil {
		t.Fatal(err)
	}
}

// buildBundle compiles ployzd and every plugin of this tree stamped with
// version v (so every binary differs from the installed one), trusting
// the development release key as `make build` does, and writes a release
// bundle signed by that key. With brokenIngress the ingress plugin is a
// program that exits at start.
func buildBundle(t *testing.T, v string, brokenIngress bool) string {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	trust := base64.StdEncoding.EncodeToString(devReleaseKey(t).Public().(ed25519.PublicKey))
	ld := "-s -w -X github.com/ployz/ployz/internal/version.Version=" + v + " -X github.com/ployz/ployz/core/release.trustedKeys=" + trust
	pkgs := map[string]string{"ployzd": "./cmd/ployzd"}
	for _, b := range release.Binaries[1:] {
		pkgs[b] = "./plugins/" + strings.TrimPrefix(b, "ployz-")
	}
	var srcs []release.Source
	for bin, pkg := range pkgs {
		out := filepath.Join(dir, bin)
		if brokenIngress && bin == "ployz-ingress-caddy" {
			if err := os.WriteFile(out, []byte("#!/bin/sh\necho broken ingress for the upgrade test >&2\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		} else {
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ld, "-o", out, pkg)
			cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("build %s: %v\n%s", pkg, err, b)
			}
		}
		srcs = append(srcs, release.Source{Path: "bin/" + bin, From: out, Mode: 0o755})
	}
	units, _ := filepath.Glob(filepath.Join(root, "packaging", "systemd", "*.service"))
	for _, u := range units {
		srcs = append(srcs, release.Source{Path: "systemd/" + filepath.Base(u), From: u, Mode: 0o644})
	}
	p := filepath.Join(dir, release.BundleName(v, "linux", runtime.GOARCH))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := release.Write(f, release.Manifest{Version: v, ProtocolMajor: version.ProtocolMajor, OS: "linux", Arch: runtime.GOARCH}, srcs); err != nil {
		t.Fatal(err)
	}
	signBundle(t, p)
	return p
}

// gapLoop sends non-retrying requests (oneShotURL: a dropped keep-alive
// connection is a failure) to each target from its own worker, and keeps
// per target the longest time between two answered requests.
type gapLoop struct {
	mu       sync.Mutex
	ok, fail int
	samples  []string
	longest  time.Duration
	where    string
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startGapLoop(targets []loopTarget, host string) *gapLoop {
	g := &gapLoop{stop: make(chan struct{})}
	for _, tg := range targets {
		for w := 0; w < 2; w++ {
			g.wg.Add(1)
			go g.worker(tg, host)
		}
	}
	return g
}

func (g *gapLoop) worker(tg loopTarget, host string) {
	defer g.wg.Done()
	c := tg.client()
	defer c.CloseIdleConnections()
	last := time.Now()
	for {
		select {
		case <-g.stop:
			return
		default:
		}
		code, body, err := oneShotURL(c, tg.url, host)
		now := time.Now()
		g.mu.Lock()
		if err != nil || code != http.StatusOK {
			g.fail++
			if len(g.samples) < 20 {
				g.samples = append(g.samples, fmt.Sprintf("%s %s: %d %v %.60s", now.Format("15:04:05.000"), tg.name, code, err, body))
			}
		} else {
			g.ok++
			if d := now.Sub(last); d > g.longest {
				g.longest, g.where = d, tg.name+" until "+now.Format("15:04:05.000")
			}
			last = now
		}
		g.mu.Unlock()
	}
}

func (g *gapLoop) end() {
	close(g.stop)
	g.wg.Wait()
}

// dnsLoops runs back-to-back non-retrying query loops on every Machine
// against its own Internal DNS until stopped, and sums them.
type dnsLoops struct {
	mu      sync.Mutex
	total   loopResult
	errs    []string
	stopped chan struct{}
	wg      sync.WaitGroup
}

func startDNSLoops(ctx context.Context, l *lab.Lab, gws map[string]string, name string) *dnsLoops {
	d := &dnsLoops{stopped: make(chan struct{})}
	for m, gw := range gws {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for {
				select {
				case <-d.stopped:
					return
				default:
				}
				res, err := queryLoop(ctx, l, m, gw+":53", name, 1500)
				d.mu.Lock()
				d.total.Queries += res.Queries
				d.total.Failed += res.Failed
				d.total.Max = max(d.total.Max, res.Max)
				d.total.Late += res.Late
				d.total.Lost += res.Lost
				d.total.MaxLate = max(d.total.MaxLate, res.MaxLate)
				if err != nil || res.Failed > 0 {
					// The loop of 1,500 queries that ended now: when, to set against the steps' times.
					d.errs = append(d.errs, fmt.Sprintf("%s (loop ending %s): %v %s", m, time.Now().Format("15:04:05.000"), err, res.LastFail))
				}
				d.mu.Unlock()
			}
		}()
	}
	return d
}

func (d *dnsLoops) end() {
	close(d.stopped)
	d.wg.Wait()
}

type upgradeOutcome struct {
	Version  string `json:"version"`
	Machines []struct {
		Name       string            `json:"name"`
		Outcome    string            `json:"outcome"`
		FailedStep string            `json:"failed_step"`
		Error      string            `json:"error"`
		Steps      []rpc.UpgradeStep `json:"steps"`
		Millis     int64             `json:"ms"`
	} `json:"machines"`
	Millis int64 `json:"ms"`
}

// requireUpgraded fails t for every Machine the rollout did not upgrade.
func (o upgradeOutcome) requireUpgraded(t *testing.T) {
	t.Helper()
	for _, m := range o.Machines {
		if m.Outcome != release.OutcomeUpgraded {
			t.Errorf("%s: %s at %s: %s", m.Name, m.Outcome, m.FailedStep, m.Error)
		}
	}
}

// TestUpgrade forms a Cluster from the loose binaries `make build` left in
// bin/, deploys a Service behind the ingress, then upgrades every Machine
// to a bundle of this tree with another version string under keep-alive
// HTTP load through every Machine's ingress and a DNS query loop on every
// Machine, counting failures. A second bundle whose ingress binary exits
// at start rolls its first Machine back and stops the rollout (exit 3).
func TestUpgrade(t *testing.T) {
	needLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	l, op, gws := upgradeLab(t, ctx)

	next := "9.9.9-upgrade-test"
	good := buildBundle(t, next, false)
	var plan []release.Action
	op.json(t, &plan, "machine", "upgrade", "--all", "--bundle", good, "--dry-run")
	if len(plan) != 3 || plan[0].Do != "upgrade" || plan[0].To != next {
		t.Fatalf("dry-run plan %+v", plan)
	}
	unsignedRefused(t, op, good)

	upgradeUnderLoad(t, ctx, l, op, gws, good, next)
	brokenRollsBack(t, ctx, l, op, next)
	pluginUpgradeUnderLoad(t, ctx, l, op, good, next)
}

// unsignedRefused: the same bundle without its .sig is refused by
// `machine upgrade` and `plugin upgrade`, naming the file.
func unsignedRefused(t *testing.T, op *operator, signed string) {
	t.Helper()
	unsigned := filepath.Join(t.TempDir(), filepath.Base(signed))
	copyFile(t, signed, unsigned, 0o644)
	for _, args := range [][]string{{"machine", "upgrade", "--all"}, {"plugin", "upgrade", "ingress-caddy"}} {
		_, errs, code := op.run(t, append(args, "--bundle", unsigned, "--dry-run")...)
		if code == 0 || !strings.Contains(errs, "bundle "+unsigned+": not signed by a trusted release key") {
			t.Errorf("%s with an unsigned bundle: exit %d, want a refusal naming %s:\n%s", strings.Join(args, " "), code, unsigned, errs)
		}
	}
}

// TestUpgradeFromPrevious forms the Cluster on release N-1 — the binaries
// in PLOYZ_UPGRADE_FROM_BIN, else a build of PLOYZ_UPGRADE_FROM (skipped
// when neither is set) — with that release's CLI, upgrades m1 alone to
// this tree and checks the mixed Cluster (mixedCluster), then upgrades the
// rest with this CLI under the same load. A release without the
// upgrade_machine route is upgraded over SSH.
func TestUpgradeFromPrevious(t *testing.T) {
	needLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	n1 := os.Getenv("PLOYZ_UPGRADE_FROM_BIN")
	if n1 == "" && os.Getenv("PLOYZ_UPGRADE_FROM") == "" {
		// In a clone of one commit there is no HEAD~1 (the Makefile's
		// default): no release N-1 to start from. Name one to run it; CI
		// clones with history, so there it is a failure.
		prereq.Missing(t, "release N-1: PLOYZ_UPGRADE_FROM=<git revision> or PLOYZ_UPGRADE_FROM_BIN=<its binaries>",
			errors.New("neither is set (a clone without history has no HEAD~1)"))
	}
	if n1 == "" {
		n1 = buildPrevious(t)
	}
	current := os.Getenv(lab.EnvBinDir)
	t.Setenv(lab.EnvBinDir, n1) // the lab image and the CLI of release N-1
	l, op, gws := upgradeLab(t, ctx)
	t.Setenv(lab.EnvBinDir, current)

	next := "9.9.9-from-previous"
	good := buildBundle(t, next, false)
	var plan []release.Action
	op.json(t, &plan, "machine", "upgrade", "--all", "--bundle", good, "--dry-run")
	t.Logf("plan from release N-1: %+v", plan)
	mixedCluster(t, ctx, l, op, good, next)
	upgradeUnderLoad(t, ctx, l, op, gws, good, next, "m1")
}

// mixedCluster upgrades m1 alone to next, then with this CLI (release N)
// on a Cluster of m1 on N and m2, m3 on N-1: scale hello's web onto every
// Machine, read its logs and exec in it, each touching the N-1 Machines,
// and ask for a plugin upgrade: a Machine whose release lacks the
// upgrade_plugin capability is refused naming it.
func mixedCluster(t *testing.T, ctx context.Context, l *lab.Lab, op *operator, bundle, next string) {
	out, errs, code := op.runCtx(ctx, t, "machine", "upgrade", "m1", "--bundle", bundle, "--json")
	if code != 0 {
		t.Fatalf("machine upgrade m1: exit %d\n%s\n%s", code, out, errs)
	}
	var list rpc.MachineList
	op.json(t, &list, "machine", "ls")
	ls := list.Machines
	versions := map[string]string{}
	for _, m := range ls {
		versions[m.Name] = m.Version
	}
	fmt.Printf("mixed Cluster: versions %v\n", versions)
	if versions["m1"] != next || versions["m2"] == next || versions["m2"] == "" || versions["m3"] != versions["m2"] {
		t.Fatalf("want m1 on %s and m2, m3 on release N-1: %v", next, versions)
	}
	op.must(t, "scale", "web", "3", "-p", "hello", "-y")
	if n, m := count(ps(t, op, "hello"), "web"); n != 3 || m != 3 {
		t.Errorf("mixed Cluster, scale web 3: %d ready on %d Machines", n, m)
	}
	for _, m := range l.Machines {
		eventually(t, 60*time.Second, m.Name+" serves hello", func() error {
			if code, _, err := hostGet(m.IP.String(), "hello.example.test", "/"); err != nil || code != 200 {
				return fmt.Errorf("%d %v", code, err)
			}
			return nil
		})
	}
	// A Container started moments ago reaches its Machine's Log Store
	// within a second or two, and a just-upgraded logstore may still be
	// starting: wait for all three.
	logsFromEvery(t, op, func(logs string) error {
		if n := strings.Count(logs, "testapp: listening"); n != 3 {
			return fmt.Errorf("mixed Cluster, logs of web's 3 Containers (one per Machine): %d listening lines\n%s", n, logs)
		}
		return nil
	}, "logs", "web", "-p", "hello", "--tail", "20") // --tail counts the merged lines: 3 Containers print 6
	for i := 0; i < 3; i++ { // exec picks a Container; three tries reach the N-1 ones too
		if out := op.must(t, "exec", "web", "-p", "hello", "--", "/testapp", "get", "http://127.0.0.1:8080/env"); !strings.Contains(out, "through-ingress") {
			t.Errorf("mixed Cluster, exec output %q", out)
		}
	}
	mixedCapability(t, op, ls, bundle)
	op.must(t, "scale", "web", "2", "-p", "hello", "-y")
}

// mixedCapability: a plugin upgrade planned on the mixed Cluster refuses
// each Machine whose release lacks upgrade_plugin with the capability
// named (only release N-1's that predate it lack it: said so otherwise).
func mixedCapability(t *testing.T, op *operator, ls []rpc.MachineView, bundle string) {
	var plan []release.Action
	op.json(t, &plan, "plugin", "upgrade", "ingress-caddy", "--bundle", bundle, "--dry-run")
	for _, a := range plan {
		i := slices.IndexFunc(ls, func(m rpc.MachineView) bool { return m.ID == a.MachineID })
		lacks := i >= 0 && !slices.Contains(ls[i].Capabilities, rpc.CapUpgradePlugin)
		switch {
		case lacks && (a.Do != "refuse" || a.Missing != rpc.CapUpgradePlugin):
			t.Errorf("%s lacks %s but the plan says %s (%s, missing %q)", a.Name, rpc.CapUpgradePlugin, a.Do, a.Reason, a.Missing)
		case lacks:
			fmt.Printf("mixed Cluster: %s refused for a plugin upgrade, missing_capability %s\n", a.Name, a.Missing)
		case a.Do == "refuse":
			t.Errorf("%s has %s but was refused: %s", a.Name, rpc.CapUpgradePlugin, a.Reason)
		}
	}
}

// buildPrevious builds release N-1's binaries from PLOYZ_UPGRADE_FROM.
func buildPrevious(t *testing.T) string {
	rev := os.Getenv("PLOYZ_UPGRADE_FROM")
	src, bin := t.TempDir(), t.TempDir()
	// Release N-1 trusts the same development key as this tree's build
	// (a Makefile older than the key ignores it).
	key := filepath.Join(os.Getenv(lab.EnvBinDir), "dev-release.key")
	cmd := exec.Command("sh", "-c", "git archive "+rev+" | tar -x -C "+src+" && make -C "+src+" build BIN="+bin+" DEV_RELEASE_KEY="+key+" VERSION=n1-$(git rev-parse --short "+rev+")")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build release N-1 from %s: %v\n%s", rev, err, out)
	}
	return bin
}

// upgradeLab forms a 3-Machine Cluster with the CLI in PLOYZ_BIN_DIR,
// deploys hello behind the ingress and returns each Machine's gateway.
func upgradeLab(t *testing.T, ctx context.Context) (*lab.Lab, *operator, map[string]string) {
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	gws := map[string]string{}
	var in rpc.Inspection
	op.json(t, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", l.Machines[0].Name)
	gws[l.Machines[0].Name] = gateway(t, in.Subnet)
	for _, m := range l.Machines[1:] {
		op.json(t, &in, "machine", "add", "root@"+m.IP.String(), "--name", m.Name)
		gws[m.Name] = gateway(t, in.Subnet)
	}
	deployHello(t, ctx, l, op)
	return l, op, gws
}

// deployHello waits for every Machine of l's ingress, deploys hello
// behind it and waits until every Machine serves it.
func deployHello(t *testing.T, ctx context.Context, l *lab.Lab, op *operator) {
	t.Helper()
	for _, m := range l.Machines {
		eventually(t, 90*time.Second, m.Name+" ingress unit active", func() error {
			out, err := l.Exec(ctx, m.Name, "systemctl", "is-active", "ployz-plugin@ingress-caddy.service")
			if err != nil || out != "active" {
				return fmt.Errorf("%q: %v", out, err)
			}
			return nil
		})
	}
	if doc, errs, code := deployFile(t, op, ingressCompose); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d\n%s", code, errs)
	}
	for _, m := range l.Machines {
		eventually(t, 60*time.Second, m.Name+" serves hello", func() error {
			if code, _, err := hostGet(m.IP.String(), "hello.example.test", "/"); err != nil || code != 200 {
				return fmt.Errorf("%d %v", code, err)
			}
			return nil
		})
	}
}

func gateway(t *testing.T, subnet string) string {
	t.Helper()
	p, err := netip.ParsePrefix(subnet)
	if err != nil {
		t.Fatalf("subnet %q: %v", subnet, err)
	}
	return p.Masked().Addr().Next().String()
}

// Machines named in current already run next (already_current).
func upgradeUnderLoad(t *testing.T, ctx context.Context, l *lab.Lab, op *operator, gws map[string]string, bundle, next string, current ...string) {
	hl := startGapLoop(httpTargets(l), "hello.example.test")
	dl := startDNSLoops(ctx, l, gws, "web.hello-production.internal")
	time.Sleep(2 * time.Second)
	start := time.Now()
	out, errs, code := op.runCtx(ctx, t, "machine", "upgrade", "--all", "--bundle", bundle, "--json")
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	hl.end()
	dl.end()
	t.Logf("upgrade progress:\n%s", errs)
	var o upgradeOutcome
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("upgrade: exit %d, output %q: %v", code, out, err)
	}
	fmt.Printf("upgrade of 3 Machines to %s: %s (exit %d)\n", next, took.Round(100*time.Millisecond), code)
	fmt.Printf("  HTTP through every ingress: %d ok, %d failed, longest gap between answers %s (%s)\n", hl.ok, hl.fail, hl.longest.Round(time.Millisecond), hl.where)
	fmt.Printf("  DNS on every Machine: %d queries, %d failed (%d answered late, latest after %s; %d never answered), slowest answer %s\n",
		dl.total.Queries, dl.total.Failed, dl.total.Late, dl.total.MaxLate.Round(time.Millisecond), dl.total.Lost, dl.total.Max.Round(time.Millisecond))
	for _, m := range o.Machines {
		t.Logf("%s: %s %s %s in %dms", m.Name, m.Outcome, m.FailedStep, m.Error, m.Millis)
	}
	if code != 0 {
		t.Errorf("upgrade --all: exit %d", code)
	}
	for _, m := range o.Machines {
		want := release.OutcomeUpgraded
		if slices.Contains(current, m.Name) {
			want = release.OutcomeCurrent
		}
		if m.Outcome != want {
			t.Errorf("%s: %s at %s: %s, want %s", m.Name, m.Outcome, m.FailedStep, m.Error, want)
		}
	}
	// Zero failed requests and queries: the data-plane plugins hand their
	// sockets to the new binary's process before the old one stops.
	if hl.fail > 0 {
		t.Errorf("%d HTTP requests failed during the upgrade; first: %v", hl.fail, hl.samples)
		journalsSince(t, ctx, l, start)
	}
	// A query never answered is a drop: the sockets' handoff must not lose
	// one. An answer later than the loop's 1 s timeout is printed, not
	// gated: runs gave 0 or 1 of ~50,000, on a 2-core host at load 10-40
	// whose slowest answers otherwise reach 0.35-0.5 s (issue 14's note).
	// A wrong answer (SERVFAIL, no records: a table lost in the swap) is
	// a failed query that timed out neither way.
	if wrong := dl.total.Failed - dl.total.Late - dl.total.Lost; dl.total.Lost > 0 || wrong > 0 {
		t.Errorf("DNS during the upgrade: %d queries never answered, %d answered wrongly: %v", dl.total.Lost, wrong, dl.errs[:min(5, len(dl.errs))])
	}
	if dl.total.Failed > 0 || len(dl.errs) > 0 {
		fmt.Printf("  NOT MET: %d DNS queries failed during the upgrade (%d late): %v\n", dl.total.Failed, dl.total.Late, dl.errs[:min(5, len(dl.errs))])
	}
	checkRuns(t, ctx, l, next)
}

// checkRuns checks every Machine's daemon and plugins run release v, as
// the Machine itself reports (inspect over its own socket).
func checkRuns(t *testing.T, ctx context.Context, l *lab.Lab, v string) {
	t.Helper()
	for _, m := range l.Machines {
		raw, err := l.Exec(ctx, m.Name, "readlink", "/var/lib/ployz/releases/current")
		if err != nil || raw != v {
			t.Errorf("%s: releases/current -> %q (%v), want %s", m.Name, raw, err, v)
		}
		// Each unit's running process is release v's binary, by content.
		units := map[string]string{"ployz.service": "ployzd", "ployz-store.service": "ployzd",
			"ployz-plugin@dns.service": "ployz-dns", "ployz-plugin@ingress-caddy.service": "ployz-ingress-caddy"}
		for unit, bin := range units {
			got, err := l.Exec(ctx, m.Name, "sh", "-c", "sha256sum /proc/$(systemctl show -p MainPID --value "+unit+")/exe | cut -c1-64")
			if err != nil {
				t.Errorf("%s %s: %v", m.Name, unit, err)
				continue
			}
			want, _ := l.Exec(ctx, m.Name, "sh", "-c", "sha256sum /var/lib/ployz/releases/"+v+"/bin/"+bin+" | cut -c1-64")
			if got != want || want == "" {
				t.Errorf("%s %s runs %.12s, release %s's %s is %.12s", m.Name, unit, got, v, bin, want)
			}
		}
		out, err := l.Exec(ctx, m.Name, "sh", "-c", "ployzd --version")
		if err != nil || !strings.Contains(out, v) {
			t.Errorf("%s: ployzd --version %q %v", m.Name, out, err)
		}
	}
}

// brokenRollsBack pushes a bundle whose ingress plugin exits at start:
// the first Machine goes back to the running release, its ingress
// serving throughout (the old process never stops for a successor that
// does not serve), the others are not attempted, exit 3.
func brokenRollsBack(t *testing.T, ctx context.Context, l *lab.Lab, op *operator, running string) {
	broken := buildBundle(t, "9.9.10-broken-ingress", true)
	hl := startGapLoop(httpTargets(l), "hello.example.test")
	start := time.Now()
	out, errs, code := op.runCtx(ctx, t, "machine", "upgrade", "--all", "--bundle", broken, "--json")
	hl.end()
	t.Logf("broken upgrade (%s) progress:\n%s", time.Since(start).Round(100*time.Millisecond), errs)
	fmt.Printf("broken ingress bundle, rolled back in %s: HTTP %d ok, %d failed, longest gap %s (%s)\n",
		time.Since(start).Round(100*time.Millisecond), hl.ok, hl.fail, hl.longest.Round(time.Millisecond), hl.where)
	if hl.fail > 0 {
		t.Errorf("%d HTTP requests failed while the broken ingress was tried and rolled back; first: %v", hl.fail, hl.samples)
		journalsSince(t, ctx, l, start)
	}
	if code != 3 {
		t.Fatalf("broken bundle: exit %d, want 3\n%s", code, out)
	}
	var o upgradeOutcome
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	want := []string{release.OutcomeRolledBack, release.OutcomeNotAttempted, release.OutcomeNotAttempted}
	for i, m := range o.Machines {
		if i < len(want) && m.Outcome != want[i] {
			t.Errorf("%s: %s, want %s", m.Name, m.Outcome, want[i])
			if i == 0 {
				journalsSince(t, ctx, l, start)
			}
		}
	}
	if len(o.Machines) != 3 || o.Machines[0].FailedStep != "plugins" || !strings.Contains(o.Machines[0].Error, "ingress-caddy") {
		t.Fatalf("rolled-back outcome: %+v", o.Machines)
	}
	// The old ingress reports its successor's failure: the step ends at
	// once, not by its 60 s timeout.
	for _, st := range o.Machines[0].Steps {
		if st.Name == "plugins" && st.Outcome != "ok" {
			fmt.Printf("broken ingress bundle: the plugins step failed after %s (was its 60 s timeout): %s\n",
				time.Duration(st.Millis)*time.Millisecond, st.Detail)
			if !strings.Contains(o.Machines[0].Error, "handoff") || st.Millis >= 45_000 {
				t.Errorf("the failed handoff was not seen at once (%d ms): %s", st.Millis, o.Machines[0].Error)
			}
		}
	}
	checkRuns(t, ctx, l, running)
	for _, m := range l.Machines {
		if code, _, err := hostGet(m.IP.String(), "hello.example.test", "/"); err != nil || code != 200 {
			t.Errorf("%s after the rollback: %d %v", m.Name, code, err)
		}
	}
}

// pluginBundle is the bundle at from with only plugin rebuilt, stamped
// with version v (another digest, the same code): a release that changes
// one plugin, built without recompiling the rest.
func pluginBundle(t *testing.T, from, v, plugin string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := release.Extract(f, filepath.Join(dir, "r"), release.Target{OS: "linux", Arch: runtime.GOARCH, ProtocolMajor: version.ProtocolMajor})
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("..")
	out := filepath.Join(dir, "r", "bin", "ployz-"+plugin)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X github.com/ployz/ployz/internal/version.Version="+v, "-o", out, "./plugins/"+plugin)
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", plugin, err, b)
	}
	var srcs []release.Source
	for _, fl := range m.Files {
		srcs = append(srcs, release.Source{Path: fl.Path, From: filepath.Join(dir, "r", fl.Path), Mode: fl.Mode})
	}
	p := filepath.Join(dir, release.BundleName(v, "linux", runtime.GOARCH))
	w, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	nm, err := release.Write(w, release.Manifest{Version: v, ProtocolMajor: version.ProtocolMajor, OS: "linux", Arch: runtime.GOARCH}, srcs)
	if err != nil {
		t.Fatal(err)
	}
	signBundle(t, p)
	fl, _ := nm.File("bin/ployz-" + plugin)
	return p, fl.SHA256
}

// pluginUpgradeUnderLoad swaps only the ingress plugin on every Machine
// (`ployz plugin upgrade`) under the keep-alive HTTP load: no failed
// request, every Machine's ingress runs the bundle's binary after, and
// the daemon and the release stay as they were.
func pluginUpgradeUnderLoad(t *testing.T, ctx context.Context, l *lab.Lab, op *operator, runningBundle, running string) {
	bundle, sum := pluginBundle(t, runningBundle, "9.9.11-ingress-only", "ingress-caddy")
	var plan []release.Action
	op.json(t, &plan, "plugin", "upgrade", "ingress-caddy", "--bundle", bundle, "--dry-run")
	if len(plan) != 3 || plan[0].Do != "upgrade" {
		t.Fatalf("plugin upgrade dry-run plan %+v", plan)
	}
	hl := startGapLoop(httpTargets(l), "hello.example.test")
	time.Sleep(time.Second)
	start := time.Now()
	out, errs, code := op.runCtx(ctx, t, "plugin", "upgrade", "ingress-caddy", "--bundle", bundle, "--json")
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	hl.end()
	t.Logf("plugin upgrade progress:\n%s", errs)
	fmt.Printf("plugin upgrade of ingress-caddy on 3 Machines: %s (exit %d): HTTP %d ok, %d failed, longest gap %s (%s)\n",
		took.Round(100*time.Millisecond), code, hl.ok, hl.fail, hl.longest.Round(time.Millisecond), hl.where)
	var o upgradeOutcome
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("plugin upgrade: exit %d, output %q: %v", code, out, err)
	}
	if code != 0 || len(o.Machines) != 3 {
		t.Errorf("plugin upgrade: exit %d, %+v", code, o.Machines)
	}
	o.requireUpgraded(t)
	if hl.fail > 0 {
		t.Errorf("%d HTTP requests failed during the plugin upgrade; first: %v", hl.fail, hl.samples)
		journalsSince(t, ctx, l, start)
	}
	for _, m := range l.Machines {
		got, err := l.Exec(ctx, m.Name, "sh", "-c", "sha256sum /proc/$(systemctl show -p MainPID --value ployz-plugin@ingress-caddy.service)/exe | cut -c1-64")
		if err != nil || got != sum {
			t.Errorf("%s: the ingress runs %.12s (%v), the bundle's is %.12s", m.Name, got, err, sum)
		}
		cur, _ := l.Exec(ctx, m.Name, "readlink", "/var/lib/ployz/releases/current")
		v, _ := l.Exec(ctx, m.Name, "ployzd", "--version")
		if cur != running || !strings.Contains(v, running) {
			t.Errorf("%s: a plugin upgrade changed the release: current %q, ployzd %q, want %s", m.Name, cur, v, running)
		}
	}
	op.json(t, &plan, "plugin", "upgrade", "ingress-caddy", "--bundle", bundle, "--dry-run")
	for _, a := range plan {
		if a.Do != "skip" {
			t.Errorf("after the plugin upgrade, %s: %s (%s), want skip", a.Name, a.Do, a.Reason)
		}
	}
}

// journalsSince prints, for a failed load loop, what every Machine's
// daemon and ingress logged since start (warnings, ejections, the
// upgrade's steps), with times to set against the failures' samples.
func journalsSince(t *testing.T, ctx context.Context, l *lab.Lab, start time.Time) {
	t.Helper()
	for _, m := range l.Machines {
		out, _ := l.Exec(ctx, m.Name, "sh", "-c", fmt.Sprintf(
			"journalctl -u ployz.service -u 'ployz-plugin@*' -u ployz-store.service -u ployz-wireguard.service -o short-precise --no-pager --since @%d | "+
				"grep -iE 'eject|warn|error|fail|upgrade|step|handoff|start|stop' | tail -80", start.Unix()-1))
		t.Logf("%s journal since %s:\n%s", m.Name, start.Format("15:04:05"), out)
	}
}
