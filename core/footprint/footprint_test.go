package footprint

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/daemon"
	"github.com/ployz/ployz/core/mesh"
	"github.com/ployz/ployz/core/mesh/dockernet"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/packaging"
)

// fakeHost answers the footprint's probes and removals from a map of
// item name to what is present, as a host over SSH would.
type fakeHost struct {
	present map[string][]string
	refuse  map[string]bool // removal runs but leaves the item
	down    bool            // every command fails (SSH lost)
	ran     []string
}

func newFakeHost() *fakeHost {
	h := &fakeHost{present: map[string][]string{}, refuse: map[string]bool{}}
	for _, it := range Items() {
		h.present[it.Name] = []string{"x-" + it.Name}
	}
	return h
}

func (h *fakeHost) shell(_ context.Context, cmd string) (string, error) {
	if h.down {
		return "", errors.New("ssh: connection lost")
	}
	for _, it := range Items() {
		switch cmd {
		case it.Probe:
			return strings.Join(h.present[it.Name], "\n"), nil
		case it.Remove:
			h.ran = append(h.ran, it.Name)
			if h.refuse[it.Name] {
				return "permission denied", errors.New("exit status 1")
			}
			delete(h.present, it.Name)
			return "", nil
		}
	}
	return "", errors.New("unknown command: " + cmd)
}

func states(rs []Result) map[string]State {
	m := map[string]State{}
	for _, r := range rs {
		m[r.Name] = r.State
	}
	return m
}

func TestUninstallRemovesAllButVolumes(t *testing.T) {
	h := newFakeHost()
	var lines []string
	rs := Uninstall(context.Background(), h.shell, Options{Progress: func(f string, a ...any) { lines = append(lines, f) }})
	if len(rs) != len(Items()) {
		t.Fatalf("%d results for %d items", len(rs), len(Items()))
	}
	for _, r := range rs {
		want := Removed
		if r.Kind == KindVolume {
			want = Kept
		}
		if r.State != want {
			t.Errorf("%s: %s, want %s (%s)", r.Name, r.State, want, r.Error)
		}
	}
	if n := len(Leftovers(Survey(context.Background(), h.shell), true)); n != 0 {
		t.Errorf("%d leftovers after uninstall", n)
	}
	if len(Leftovers(Survey(context.Background(), h.shell), false)) != 1 {
		t.Errorf("kept volumes should be the one leftover when user data counts")
	}
	// Units stop before anything else goes, files go last.
	if h.ran[0] != unitsItem().Name || !strings.HasPrefix(h.ran[len(h.ran)-1], "/") {
		t.Errorf("removal order: %v", h.ran)
	}
	if len(lines) == 0 {
		t.Error("no progress lines")
	}
	again := Uninstall(context.Background(), h.shell, Options{})
	for _, r := range again {
		if r.State != Absent && r.Kind != KindVolume {
			t.Errorf("second uninstall: %s is %s", r.Name, r.State)
		}
	}
}

func TestUninstallPurgeVolumes(t *testing.T) {
	h := newFakeHost()
	rs := Uninstall(context.Background(), h.shell, Options{PurgeVolumes: true})
	if Count(rs, Removed) != len(Items()) {
		t.Fatalf("removed %d of %d: %+v", Count(rs, Removed), len(Items()), rs)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	h := newFakeHost()
	rs := Uninstall(context.Background(), h.shell, Options{DryRun: true})
	if len(h.ran) != 0 {
		t.Fatalf("dry run removed %v", h.ran)
	}
	if Count(rs, WouldRemove) != len(Items())-1 || Count(rs, Kept) != 1 {
		t.Fatalf("dry run states: %v", states(rs))
	}
}

func TestPartialFailureReportedPerItem(t *testing.T) {
	h := newFakeHost()
	h.refuse[MeshLink] = true
	delete(h.present, DataDir)
	rs := Uninstall(context.Background(), h.shell, Options{})
	st := states(rs)
	if st[MeshLink] != Failed || st[ConfigDir] != Removed || st[DataDir] != Absent {
		t.Fatalf("states: %v", st)
	}
	for _, r := range rs {
		if r.Name == MeshLink && (!strings.Contains(r.Error, "still present") || !strings.Contains(r.Error, "permission denied")) {
			t.Errorf("error does not say what is left and why: %q", r.Error)
		}
	}
	if l := Leftovers(Survey(context.Background(), h.shell), true); len(l) != 1 || l[0].Name != MeshLink {
		t.Errorf("leftovers: %+v", l)
	}
}

func TestUnreachableHostFailsEveryItem(t *testing.T) {
	h := newFakeHost()
	h.down = true
	rs := Uninstall(context.Background(), h.shell, Options{})
	if Count(rs, Failed) != len(Items()) {
		t.Fatalf("states: %v", states(rs))
	}
	if len(Leftovers(Survey(context.Background(), h.shell), true)) != len(Items())-1 {
		t.Error("an unprobed item must count as a leftover")
	}
}

// TestNamesMatchTheirOwners pins the footprint's names to the constants
// of the packages that create those things, so a rename there fails here.
func TestNamesMatchTheirOwners(t *testing.T) {
	for got, want := range map[string]string{
		MeshLink: mesh.DefaultInterface, BridgeLink: dockernet.DefaultBridge, ManagedLabel: dockernet.ManagedLabel,
		NamespaceLbl: rpc.LabelNamespace, RunDir: filepath.Dir(rpc.DefaultSocket), ConfigDir: filepath.Dir(daemon.StoreEnvFile),
		DataDir: filepath.Dir(pluginhost.DefaultDir),
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

// TestChainRemovalDeletesJumpsFirst: a chain still jumped to cannot be
// deleted, so each parent's jumps go before -F/-X.
func TestChainRemovalDeletesJumpsFirst(t *testing.T) {
	for _, c := range chains {
		it := c.item()
		for _, p := range c.parents {
			j := strings.Index(it.Remove, "-D "+p+" -j "+c.name)
			if j < 0 || j > strings.Index(it.Remove, "-X "+c.name) {
				t.Errorf("%s: jump from %s not deleted before the chain", it.Name, p)
			}
		}
		if c.v6 != strings.Contains(it.Probe, "ip6tables") {
			t.Errorf("%s: families in probe: %s", it.Name, it.Probe)
		}
	}
}
