package footprint_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/daemon"
	"github.com/ployz/ployz/core/footprint"
	"github.com/ployz/ployz/core/mesh"
	"github.com/ployz/ployz/core/mesh/dockernet"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/fakehost"
	"github.com/ployz/ployz/packaging"
)

func states(rs []footprint.Result) map[string]footprint.State {
	m := map[string]footprint.State{}
	for _, r := range rs {
		m[r.Name] = r.State
	}
	return m
}

func TestUninstallRemovesAllButVolumes(t *testing.T) {
	h := fakehost.Installed()
	var lines []string
	rs := footprint.Uninstall(context.Background(), h.Shell, footprint.Options{Progress: func(f string, a ...any) { lines = append(lines, f) }})
	if len(rs) != len(footprint.Items()) {
		t.Fatalf("%d results for %d items", len(rs), len(footprint.Items()))
	}
	for _, r := range rs {
		want := footprint.Removed
		if r.Kind == footprint.KindVolume {
			want = footprint.Kept
		}
		if r.State != want {
			t.Errorf("%s: %s, want %s (%s)", r.Name, r.State, want, r.Error)
		}
	}
	if n := len(footprint.Leftovers(footprint.Survey(context.Background(), h.Shell), true)); n != 0 {
		t.Errorf("%d leftovers after uninstall", n)
	}
	if len(footprint.Leftovers(footprint.Survey(context.Background(), h.Shell), false)) != 1 {
		t.Errorf("kept volumes should be the one leftover when user data counts")
	}
	// Units stop before anything else goes, files go last.
	if h.Ran[0] != footprint.Items()[0].Name || footprint.Items()[0].Kind != footprint.KindUnit || !strings.HasPrefix(h.Ran[len(h.Ran)-1], "/") {
		t.Errorf("removal order: %v", h.Ran)
	}
	if len(lines) == 0 {
		t.Error("no progress lines")
	}
	again := footprint.Uninstall(context.Background(), h.Shell, footprint.Options{})
	for _, r := range again {
		if r.State != footprint.Absent && r.Kind != footprint.KindVolume {
			t.Errorf("second uninstall: %s is %s", r.Name, r.State)
		}
	}
}

func TestUninstallPurgeVolumes(t *testing.T) {
	h := fakehost.Installed()
	rs := footprint.Uninstall(context.Background(), h.Shell, footprint.Options{PurgeVolumes: true})
	if footprint.Count(rs, footprint.Removed) != len(footprint.Items()) {
		t.Fatalf("removed %d of %d: %+v", footprint.Count(rs, footprint.Removed), len(footprint.Items()), rs)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	h := fakehost.Installed()
	rs := footprint.Uninstall(context.Background(), h.Shell, footprint.Options{DryRun: true})
	if len(h.Ran) != 0 {
		t.Fatalf("dry run removed %v", h.Ran)
	}
	if footprint.Count(rs, footprint.WouldRemove) != len(footprint.Items())-1 || footprint.Count(rs, footprint.Kept) != 1 {
		t.Fatalf("dry run states: %v", states(rs))
	}
}

func TestPartialFailureReportedPerItem(t *testing.T) {
	h := fakehost.Installed()
	h.Refuse[footprint.MeshLink] = true
	delete(h.Present, footprint.DataDir)
	rs := footprint.Uninstall(context.Background(), h.Shell, footprint.Options{})
	st := states(rs)
	if st[footprint.MeshLink] != footprint.Failed || st[footprint.ConfigDir] != footprint.Removed || st[footprint.DataDir] != footprint.Absent {
		t.Fatalf("states: %v", st)
	}
	for _, r := range rs {
		if r.Name == footprint.MeshLink && (!strings.Contains(r.Error, "still present") || !strings.Contains(r.Error, "permission denied")) {
			t.Errorf("error does not say what is left and why: %q", r.Error)
		}
	}
	if l := footprint.Leftovers(footprint.Survey(context.Background(), h.Shell), true); len(l) != 1 || l[0].Name != footprint.MeshLink {
		t.Errorf("leftovers: %+v", l)
	}
}

func TestUnreachableHostFailsEveryItem(t *testing.T) {
	h := fakehost.Installed()
	h.Down = true
	rs := footprint.Uninstall(context.Background(), h.Shell, footprint.Options{})
	if footprint.Count(rs, footprint.Failed) != len(footprint.Items()) {
		t.Fatalf("states: %v", states(rs))
	}
	if len(footprint.Leftovers(footprint.Survey(context.Background(), h.Shell), true)) != len(footprint.Items())-1 {
		t.Error("an unprobed item must count as a leftover")
	}
}

// TestNamesMatchTheirOwners pins the footprint's names to the constants
// of the packages that create those things, so a rename there fails here.
func TestNamesMatchTheirOwners(t *testing.T) {
	for got, want := range map[string]string{
		footprint.MeshLink: mesh.DefaultInterface, footprint.BridgeLink: dockernet.DefaultBridge, footprint.ManagedLabel: dockernet.ManagedLabel,
		footprint.NamespaceLbl: rpc.LabelNamespace, footprint.RunDir: filepath.Dir(rpc.DefaultSocket), footprint.ConfigDir: filepath.Dir(daemon.StoreEnvFile),
		footprint.DataDir: filepath.Dir(pluginhost.DefaultDir), footprint.NamespaceChains: dockernet.NamespaceChainPrefix(""),
		footprint.DockerDropIn: dockernet.DropInPath,
	} {
		if got != want {
			t.Errorf("footprint has %q, its owner %q", got, want)
		}
	}
	// Every unit machine init writes matches the unit-file glob and the
	// units probe.
	units, _ := fs.Glob(packaging.Files, "systemd/*.service")
	if len(units) == 0 {
		t.Fatal("no units in packaging")
	}
	for _, u := range units {
		if ok, _ := filepath.Match("ployz*.service", filepath.Base(u)); !ok {
			t.Errorf("unit %s escapes the footprint's ployz* globs", u)
		}
	}
	if pluginhost.UnitName("dns") != "ployz-plugin@dns.service" {
		t.Error("plugin units must stay ployz*")
	}
}
