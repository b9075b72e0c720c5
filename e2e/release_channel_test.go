package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

const (
	channelV1 = "0.90.0"
	channelV2 = "0.90.1"
)

// TestReleaseChannel installs Ployz the way a user does, from `make
// release` output served over HTTP, on bare Debian 13 Machines (no Ployz
// in the image): m1 from the release's .deb and then `machine init` with
// the release's own CLI, m2 by `machine add` from the context's channel.
// Under keep-alive load the channel moves to the next release and
// `machine upgrade --all` takes it: no failed request, both Machines on
// it, dpkg's files untouched. A tampered bundle is refused by `machine
// add` naming the file, with nothing installed on m3; `dpkg -r` on m1
// stops Ployz and leaves its data (docs/releases.md).
func TestReleaseChannel(t *testing.T) {
	needLab(t)
	wall := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	dist := t.TempDir()
	key := filepath.Join(t.TempDir(), "release.key")
	gen := exec.CommandContext(ctx, "go", "run", "./internal/releasekey", "gen", key)
	gen.Dir = ".."
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("releasekey gen: %v\n%s", err, out)
	}
	// Both releases are built while the lab boots; the channel is then
	// pointed back at the first until the upgrade.
	built := make(chan error, 1)
	go func() { built <- makeReleases(ctx, dist, key) }()
	l := lab.ForTestBare(t, 3)
	m1, m2, m3 := l.Machines[0], l.Machines[1], l.Machines[2]
	relStart := time.Now()
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	t.Logf("releases built (waited %s after the lab was up)", time.Since(relStart).Round(time.Second))
	setChannel(t, dist, channelV1)
	src := serveDist(t, l, dist)

	op := newOperator(t, l)
	op.cli = filepath.Join(t.TempDir(), "ployz") // no bundle beside it: installs come from the channel
	copyFile(t, filepath.Join(dist, "v0", channelV1, release.CLIName(channelV1, "linux", "amd64")), op.cli, 0o755)

	// m1: the .deb, then machine init.
	debs, _ := filepath.Glob(filepath.Join(dist, "v0", channelV1, "*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("release %s: .debs %v", channelV1, debs)
	}
	deb, err := os.ReadFile(debs[0])
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := l.ExecInteractive(ctx, m1.Name, bytes.NewReader(deb), &out, &out, "sh", "-c", "cat > /tmp/ployz.deb && dpkg -i /tmp/ployz.deb"); err != nil {
		t.Fatalf("m1 dpkg -i: %v\n%s", err, out.String())
	}
	var in rpc.Inspection
	initStart := time.Now()
	op.json(t, &in, "machine", "init", "root@"+m1.IP.String(), "--name", m1.Name, "--release-source", src, "--channel", "stable")
	initTook := time.Since(initStart)
	if in.DaemonVersion != channelV1 {
		t.Fatalf("m1 runs %q, want %s", in.DaemonVersion, channelV1)
	}
	var saved struct{ Source, Channel string }
	op.json(t, &saved, "ctx", "release")
	if saved.Source != src || saved.Channel != "stable" {
		t.Fatalf("machine init saved release setting %+v, want %s stable", saved, src)
	}

	// m2: nothing on it; the context's channel installs it.
	addStart := time.Now()
	op.json(t, &in, "machine", "add", "root@"+m2.IP.String(), "--name", m2.Name)
	addTook := time.Since(addStart)
	if in.DaemonVersion != channelV1 || in.Arch != "amd64" {
		t.Fatalf("m2 runs %q %s, want %s amd64", in.DaemonVersion, in.Arch, channelV1)
	}
	fmt.Printf("machine init (m1, .deb installed) to participating: %s\n", initTook.Round(100*time.Millisecond))
	fmt.Printf("machine add (m2, bare Debian 13, from the channel on the lab network) to participating: %s\n", addTook.Round(100*time.Millisecond))

	tamperedRefused(t, ctx, l, op, dist, m3)

	cluster := *l
	cluster.Machines = l.Machines[:2]
	deployHello(t, ctx, &cluster, op)

	setChannel(t, dist, channelV2)
	channelUpgrade(t, ctx, &cluster, op)
	if out, err := l.Exec(ctx, m1.Name, "dpkg", "-V", "ployz"); err != nil || out != "" {
		t.Errorf("m1: the upgrade changed the package's files: dpkg -V %q %v", out, err)
	}
	selfUpdate(t, op)
	dpkgRemove(t, ctx, l, m1)
	fmt.Printf("TestReleaseChannel wall time: %s\n", time.Since(wall).Round(time.Second))
}

// makeReleases runs `make release` twice into dist, narrowed to
// linux/amd64, signed by key.
func makeReleases(ctx context.Context, dist, key string) error {
	for _, v := range []string{channelV1, channelV2} {
		start := time.Now()
		cmd := exec.CommandContext(ctx, "make", "-C", "..", "release", "DIST="+dist, "RELEASE_KEY="+key, "VERSION="+v, "CHANNEL=stable",
			"RELEASE_ARCHES=amd64", "CLI_TARGETS=linux/amd64", "RELEASE_DOCS=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("make release VERSION=%s: %v\n%s", v, err, out)
		}
		fmt.Printf("make release VERSION=%s: %s\n", v, time.Since(start).Round(time.Second))
	}
	return nil
}

// setChannel points dist's v0/stable at v.
func setChannel(t *testing.T, dist, v string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dist, filepath.FromSlash(release.ChannelPath("v0", "stable"))), []byte(v+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// serveDist serves dist over HTTP on the host's address on the lab's
// network and returns its URL.
func serveDist(t *testing.T, l *lab.Lab, dist string) string {
	t.Helper()
	bind := hostOnLab(t, context.Background(), l)
	ln, err := net.Listen("tcp", net.JoinHostPort(bind, "0"))
	if err != nil {
		t.Fatalf("serve the release source: %v", err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dist)), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) // ends with Close
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, mode)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// tamperedRefused: a copy of the source whose bundle gained a byte is
// refused by `machine add`, naming the file; m3 gets nothing.
func tamperedRefused(t *testing.T, ctx context.Context, l *lab.Lab, op *operator, dist string, m *lab.Machine) {
	t.Helper()
	bad := filepath.Join(t.TempDir(), "dist")
	if out, err := exec.Command("cp", "-a", dist, bad).CombinedOutput(); err != nil {
		t.Fatalf("copy the source: %v %s", err, out)
	}
	name := release.BundleName(channelV1, "linux", "amd64")
	f, err := os.OpenFile(filepath.Join(bad, "v0", channelV1, name), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	_, errs, code := op.run(t, "machine", "add", "root@"+m.IP.String(), "--name", m.Name, "--release-source", bad)
	if code == 0 || !strings.Contains(errs, name) {
		t.Errorf("tampered bundle: exit %d, want a refusal naming %s:\n%s", code, name, errs)
	}
	if out, err := l.Exec(ctx, m.Name, "sh", "-c", "for p in /usr/local/bin/ployzd /usr/local/bin/ployz /etc/systemd/system/ployz.service /var/lib/ployz; do test -e $p && echo $p; done; true"); err != nil || out != "" {
		t.Errorf("m3 after the refusal: %q %v, want nothing of Ployz", out, err)
	}
	t.Logf("tampered bundle refused: %s", lastLine(errs))
}

// channelUpgrade upgrades every Machine from the channel under
// non-retrying keep-alive load through each ingress.
func channelUpgrade(t *testing.T, ctx context.Context, cluster *lab.Lab, op *operator) {
	t.Helper()
	hl := startGapLoop(httpTargets(cluster), "hello.example.test")
	time.Sleep(2 * time.Second)
	start := time.Now()
	out, errs, code := op.runCtx(ctx, t, "machine", "upgrade", "--all", "--json")
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	hl.end()
	t.Logf("upgrade progress:\n%s", errs)
	var o upgradeOutcome
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("upgrade: exit %d, output %q: %v", code, out, err)
	}
	fmt.Printf("upgrade of 2 Machines from the channel to %s: %s (exit %d)\n", channelV2, took.Round(100*time.Millisecond), code)
	fmt.Printf("  HTTP through every ingress: %d ok, %d failed, longest gap between answers %s (%s)\n", hl.ok, hl.fail, hl.longest.Round(time.Millisecond), hl.where)
	if code != 0 || o.Version != channelV2 {
		t.Errorf("upgrade --all: exit %d, version %q", code, o.Version)
	}
	o.requireUpgraded(t)
	if hl.fail > 0 {
		t.Errorf("%d HTTP requests failed during the upgrade; first: %v", hl.fail, hl.samples)
	}
	checkRuns(t, ctx, cluster, channelV2)
}

// selfUpdate: the release's CLI updates itself to the channel's, then
// says it is up to date.
func selfUpdate(t *testing.T, op *operator) {
	t.Helper()
	var r struct {
		To      string `json:"to"`
		Updated bool   `json:"updated"`
	}
	op.json(t, &r, "self-update")
	if !r.Updated || r.To != channelV2 {
		t.Errorf("self-update: %+v, want updated to %s", r, channelV2)
	}
	if out := op.must(t, "self-update"); !strings.Contains(out, "already") {
		t.Errorf("second self-update: %q, want already up to date", out)
	}
}

// dpkgRemove: `dpkg -r` stops Ployz and removes the package's files; the
// releases `machine upgrade` installed, and the data, stay.
func dpkgRemove(t *testing.T, ctx context.Context, l *lab.Lab, m *lab.Machine) {
	t.Helper()
	if out, err := l.Exec(ctx, m.Name, "dpkg", "-r", "ployz"); err != nil {
		t.Fatalf("dpkg -r: %v %s", err, out)
	}
	checks := map[string]string{
		"systemctl is-active ployz.service || true":                      "inactive",
		"systemctl is-enabled ployz.service 2>/dev/null || true":         "disabled",
		"test -e /usr/lib/ployz && echo left || echo gone":               "gone",
		"test -d /var/lib/ployz/releases/" + channelV2 + " && echo kept": "kept",
	}
	for cmd, want := range checks {
		if out, err := l.Exec(ctx, m.Name, "sh", "-c", cmd); err != nil || out != want {
			t.Errorf("after dpkg -r, %s: %q %v, want %q", cmd, out, err, want)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}
