package daemon

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/mesh/dockernet"
	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

func isoRow(key, owner, ns, ip, state string, created int64) store.Row[store.ContainerBody] {
	return store.Row[store.ContainerBody]{Key: key, Owner: owner, Body: store.ContainerBody{Namespace: ns, IP: ip, State: state, CreatedAt: created}}
}

// TestIsolationOf computes the membership of two projects across two
// Machines: an address reused goes to the newer Container only, and rows
// whose owner cannot vouch for the address, or whose Container ended,
// add nothing.
func TestIsolationOf(t *testing.T) {
	ms := serving.Machines{Network: netip.MustParsePrefix("10.210.0.0/16"), Subnets: map[string]netip.Prefix{
		"m1": netip.MustParsePrefix("10.210.1.0/24"), "m2": netip.MustParsePrefix("10.210.2.0/24")}}
	rows := []store.Row[store.ContainerBody]{
		isoRow("a-web", "m1", "a", "10.210.1.2", "running", 100),
		isoRow("a-db", "m2", "a", "10.210.2.2", "running", 100),
		isoRow("b-web", "m1", "b", "10.210.1.3", "running", 100),
		isoRow("b-db-new", "m2", "b", "10.210.2.4", "running", 300),
		// b's old db left 10.210.2.5; a's new db took it before b's row went
		isoRow("b-db-old", "m2", "b", "10.210.2.5", "running", 100),
		isoRow("a-db-new", "m2", "a", "10.210.2.5", "running", 200),
		isoRow("b-ended", "m2", "b", "10.210.2.6", "exited", 100),
		isoRow("forged", "m1", "b", "10.210.2.7", "running", 100), // m2's subnet
		isoRow("gone-machine", "m3", "b", "10.210.3.2", "running", 100),
		isoRow("outside", "m1", "b", "192.168.1.2", "running", 100),
		isoRow("v6", "m1", "b", "fd00::2", "running", 100),
		isoRow("no-ip", "m1", "b", "", "created", 100),
		isoRow("by-hand", "m1", "", "10.210.1.9", "running", 100),
	}
	// Compose networks: b's api is on b's default and the external
	// "payments", a's worker on a's own "jobs" network only; a row naming
	// another namespace's network gets nothing of it.
	api := isoRow("b-api", "m1", "b", "10.210.1.10", "running", 100)
	api.Body.Networks = []string{"b", "external:payments"}
	worker := isoRow("a-worker", "m2", "a", "10.210.2.10", "running", 100)
	worker.Body.Networks = []string{"a/jobs"}
	pay := isoRow("a-pay", "m2", "a", "10.210.2.11", "running", 100)
	pay.Body.Networks = []string{"external:payments", "b"}
	sneaky := isoRow("a-sneaky", "m2", "a", "10.210.2.12", "running", 100)
	sneaky.Body.Networks = []string{"b", "b/back"}
	rows = append(rows, api, worker, pay, sneaky)
	got := isolationOf(rows, ms)
	want := map[string][]string{
		"a":                 {"10.210.1.2", "10.210.2.2", "10.210.2.5", "10.210.2.12"},
		"a/jobs":            {"10.210.2.10"},
		"b":                 {"10.210.1.3", "10.210.1.10", "10.210.2.4"},
		"external:payments": {"10.210.1.10", "10.210.2.11"},
	}
	if got.Cluster != ms.Network || len(got.Networks) != len(want) {
		t.Fatalf("membership %+v, want %v", got, want)
	}
	for ns, as := range want {
		g := got.Networks[ns]
		if len(g) != len(as) {
			t.Errorf("namespace %q: %v, want %v", ns, g, as)
			continue
		}
		for i := range as {
			if g[i].String() != as[i] {
				t.Errorf("namespace %q: %v, want %v", ns, g, as)
				break
			}
		}
	}
	if len(got.Open) != 1 || got.Open[0].String() != "10.210.1.9" {
		t.Errorf("open addresses %v, want the one run by hand", got.Open)
	}
	// The same rows in another order make the same rules.
	rev := make([]store.Row[store.ContainerBody], len(rows))
	for i, r := range rows {
		rev[len(rows)-1-i] = r
	}
	if k := isolationOf(rev, ms).Key(); k != got.Key() {
		t.Errorf("row order changed the membership:\n%s\n%s", k, got.Key())
	}
}

func TestIsolationSavedRoundTrip(t *testing.T) {
	ms := serving.Machines{Network: netip.MustParsePrefix("10.210.0.0/16"), Subnets: map[string]netip.Prefix{"m1": netip.MustParsePrefix("10.210.1.0/24")}}
	iso := isolationOf([]store.Row[store.ContainerBody]{isoRow("x", "m1", "a", "10.210.1.2", "running", 1), isoRow("y", "m1", "b", "10.210.1.3", "running", 1), isoRow("z", "m1", "", "10.210.1.4", "running", 1)}, ms)
	p := filepath.Join(t.TempDir(), isolationFile)
	if err := dockernet.SaveIsolation(p, netip.Prefix{}, iso); err != nil {
		t.Fatal(err)
	}
	back, _, err := dockernet.LoadIsolation(p)
	if err != nil {
		t.Fatal(err)
	}
	if back.Key() != iso.Key() {
		t.Errorf("saved %s, loaded %s", iso.Key(), back.Key())
	}
}

// TestIsolationRestoredAtStart: a daemon starting where the kernel holds
// no isolation chains (a reboot) restores the membership it saved, before
// reading any store; an unreadable file leaves the network open, as a
// first start does. Real iptables, chains of the test's own prefix.
func TestIsolationRestoredAtStart(t *testing.T) {
	prereq.Root(t, "iptables chains")
	prereq.Command(t, "iptables")
	prereq.Command(t, "iptables-restore")
	t.Setenv(dockernet.EnvIptables, "iptables")
	cfg := dockernet.Config{ChainPrefix: "PZR" + machine.NewID()[:6], Subnet: netip.MustParsePrefix("10.210.7.0/24")}
	t.Cleanup(func() { dockernet.RemoveForwarding(cfg) }) // best effort
	dataDir := t.TempDir()
	ms := serving.Machines{Network: netip.MustParsePrefix("10.210.0.0/16"), Subnets: map[string]netip.Prefix{"m1": cfg.Subnet}}
	saved := isolationOf([]store.Row[store.ContainerBody]{isoRow("x", "m1", "shop", "10.210.7.2", "running", 1)}, ms)
	if err := dockernet.SaveIsolation(filepath.Join(dataDir, isolationFile), cfg.Subnet, saved); err != nil {
		t.Fatal(err)
	}
	listing := func() string {
		out, err := exec.Command("iptables", "-S").Output()
		if err != nil {
			t.Fatal(err)
		}
		var mine []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, cfg.ChainPrefix) {
				mine = append(mine, l)
			}
		}
		return strings.Join(mine, "\n")
	}
	d := &Daemon{cfg: Config{DataDir: dataDir}, log: hclog.NewNullLogger()}
	d.startIsolation(cfg)
	got := listing()
	for _, want := range []string{"-A " + cfg.ChainPrefix + "-ISOLATE -s 10.210.7.2/32 -g " + cfg.ChainPrefix + "-NS-", "-d 10.210.7.2/32 -j RETURN", "-A " + cfg.ChainPrefix + "-ISOLATE -j DROP"} {
		if !strings.Contains(got, want) {
			t.Errorf("after start, no %q in:\n%s", want, got)
		}
	}
	if v := d.isolationView(); v == nil || v.Generation != 0 {
		t.Errorf("before the store is read the view is %+v, want generation 0", v)
	}

	// A membership committed from rows is saved for the next start.
	moved := isolationOf([]store.Row[store.ContainerBody]{isoRow("y", "m1", "blog", "10.210.7.3", "running", 1)}, ms)
	if err := d.commitIsolation(cfg, moved, false); err != nil {
		t.Fatal(err)
	}
	if v := d.isolationView(); v.Generation != 1 || v.Networks != 1 || v.Addresses != 1 || v.ChangedAt == "" {
		t.Errorf("view after a commit: %+v", v)
	}
	back, _, err := dockernet.LoadIsolation(filepath.Join(dataDir, isolationFile))
	if err != nil || back.Key() != moved.Key() {
		t.Errorf("saved %v, %v; want %s", back, err, moved.Key())
	}
	if got := listing(); strings.Contains(got, "10.210.7.2") || !strings.Contains(got, "10.210.7.3") {
		t.Errorf("after the commit:\n%s", got)
	}

	if err := os.WriteFile(filepath.Join(dataDir, isolationFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	d2 := &Daemon{cfg: Config{DataDir: dataDir}, log: hclog.NewNullLogger()}
	d2.startIsolation(cfg) // logs and keeps what the kernel holds
	if got := listing(); !strings.Contains(got, "10.210.7.3") {
		t.Errorf("an unreadable file changed the rules:\n%s", got)
	}
}
