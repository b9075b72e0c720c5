package dockernet

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/internal/prereq"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// TestIsolationRestoreGolden pins the rules one membership makes: the
// chain layout the kernel test exercises (an address on two networks has
// the chain of that pair), and the stale chain deleted in the same commit.
func TestIsolationRestoreGolden(t *testing.T) {
	iso := Isolation{Cluster: netip.MustParsePrefix("10.210.0.0/16"), Networks: map[string][]netip.Addr{
		"shop":              addrs("10.210.1.7", "10.210.2.3", "10.210.1.7"),
		"billing":           addrs("10.210.1.9", "10.210.2.4"),
		"external:payments": addrs("10.210.2.3", "10.210.2.4"),
	}, Open: addrs("10.210.2.9")}
	got := isolationRestore(Config{}, iso, []string{"PLOYZ-NS-000000000000", networksChain(Config{}, []string{"shop"})})
	golden := filepath.Join("testdata", "isolation.restore")
	if os.Getenv("PLOYZ_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("isolation rules differ from %s:\n%s", golden, got)
	}
}

func TestMachineAddrs(t *testing.T) {
	for net, want := range map[string]string{
		"10.210.0.0/16": "10.210.0.1/255.255.0.255",
		"10.192.0.0/12": "10.192.0.1/255.240.0.255",
		"10.9.4.0/24":   "10.9.4.1/255.255.255.255",
	} {
		if got := machineAddrs(netip.MustParsePrefix(net)); got != want {
			t.Errorf("machineAddrs(%s) = %s, want %s", net, got, want)
		}
	}
}

func TestIsolationKeyIgnoresOrder(t *testing.T) {
	n := netip.MustParsePrefix("10.210.0.0/16")
	a := Isolation{Cluster: n, Networks: map[string][]netip.Addr{"a": addrs("10.210.1.3", "10.210.1.2"), "b": addrs("10.210.2.2")}}
	b := Isolation{Cluster: n, Networks: map[string][]netip.Addr{"b": addrs("10.210.2.2"), "a": addrs("10.210.1.2", "10.210.1.3")}}
	if a.Key() != b.Key() {
		t.Errorf("equal memberships, different keys:\n%s\n%s", a.Key(), b.Key())
	}
	b.Networks["b"] = addrs("10.210.1.3")
	if a.Key() == b.Key() {
		t.Error("an address moved between networks and the key did not change")
	}
}

// TestIsolationKernel builds a Machine namespace with a bridge holding
// three Containers (namespaces A, B, A) and a mesh link to a peer that
// holds a remote Container of B (unmasqueraded) and a Machine's .1, installs the forwarding and
// isolation chains with the real iptables, and connects every way.
func TestIsolationKernel(t *testing.T) {
	prereq.Root(t, "network namespaces and iptables")
	for _, b := range []string{"ip", "iptables", "iptables-restore"} {
		prereq.Command(t, b)
	}
	n := newNSLab(t)
	id, machine, peer, cfg := n.id, n.machine, n.peer, n.cfg
	cfg.Subnet = netip.MustParsePrefix("10.98.1.0/24")
	cfg.ClusterNetwork = netip.MustParsePrefix("10.98.0.0/16")
	ctrs := map[string]string{"a1": "10.98.1.2", "b1": "10.98.1.3", "a2": "10.98.1.4", "o1": "10.98.1.5"}
	ip(t, "-n", machine, "link", "add", cfg.Bridge, "type", "bridge")
	for name, addr := range ctrs {
		ns := "pzc" + name + id
		addNS(t, ns)
		ip(t, "link", "add", "pzv"+name+id, "netns", machine, "type", "veth", "peer", "name", "eth0", "netns", ns)
		for _, c := range [][]string{
			{machine, "link", "set", "pzv" + name + id, "master", cfg.Bridge},
			{machine, "link", "set", "pzv" + name + id, "up"},
			{ns, "addr", "add", addr + "/24", "dev", "eth0"},
			{ns, "link", "set", "eth0", "up"}, {ns, "link", "set", "lo", "up"},
			{ns, "route", "add", "default", "via", "10.98.1.1"},
		} {
			ip(t, append([]string{"-n", c[0]}, c[1:]...)...)
		}
	}
	for _, c := range [][]string{
		{machine, "addr", "add", "10.98.1.1/24", "dev", cfg.Bridge},
		{machine, "link", "set", cfg.Bridge, "up"},
		{machine, "addr", "add", "10.98.1.1/32", "dev", cfg.MeshInterface},
		{machine, "link", "set", cfg.MeshInterface, "up"}, {machine, "link", "set", "lo", "up"},
		{machine, "route", "add", "10.98.2.0/24", "dev", cfg.MeshInterface},
		{peer, "addr", "add", "10.98.2.1/32", "dev", "pzq" + id},
		{peer, "addr", "add", "10.98.2.5/32", "dev", "pzq" + id},
		{peer, "link", "set", "pzq" + id, "up"}, {peer, "link", "set", "lo", "up"},
		{peer, "route", "add", "10.98.1.1/32", "dev", "pzq" + id},
		{peer, "route", "add", "10.98.1.0/24", "via", "10.98.1.1"},
	} {
		ip(t, append([]string{"-n", c[0]}, c[1:]...)...)
	}
	// A published port: the Machine's 9000 is a1's 8080.
	inNS(t, machine, func() {
		if out, err := exec.Command(iptablesCommand(), "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", "9000", "-j", "DNAT", "--to-destination", "10.98.1.2:8080").CombinedOutput(); err != nil {
			t.Errorf("DNAT: %v: %s", err, out)
		}
	})

	for name := range ctrs {
		listenIn(t, "pzc"+name+id, "8080")
	}
	listenIn(t, peer, "8080")
	reach := func(ns, src, dst string) bool { return connects(t, ns, src, dst) }
	type flow struct {
		ns, src, dst string
		want         bool
	}
	check := func(stage string, flows []flow) {
		t.Helper()
		for _, f := range flows {
			if got := reach(f.ns, f.src, f.dst); got != f.want {
				t.Errorf("%s: %s (from %s) → %s: reached %v, want %v", stage, f.ns, f.src, f.dst, got, f.want)
			}
		}
	}
	a1, b1, remote := "pzca1"+id, "pzcb1"+id, peer
	check("before isolation", []flow{{a1, "", "10.98.1.3:8080", true}, {a1, "", "10.98.2.5:8080", true}, {remote, "10.98.2.5", "10.98.1.2:8080", true}})

	var err error
	inNS(t, machine, func() { err = EnsureForwarding(cfg) })
	if err != nil {
		t.Fatal(err)
	}
	check("forwarding, no membership yet", []flow{{a1, "", "10.98.1.3:8080", true}})
	iso := Isolation{Cluster: cfg.ClusterNetwork, Networks: map[string][]netip.Addr{
		"A": addrs("10.98.1.2", "10.98.1.4"), "B": addrs("10.98.1.3", "10.98.2.5"), "S": addrs("10.98.1.4", "10.98.2.5")},
		Open: addrs("10.98.1.5")}
	inNS(t, machine, func() { err = EnsureIsolation(cfg, iso) })
	if err != nil {
		t.Fatal(err)
	}
	check("isolated", []flow{
		{a1, "", "10.98.1.4:8080", true},               // own namespace, same bridge
		{a1, "", "10.98.1.3:8080", false},              // B on the same bridge
		{a1, "", "10.98.2.5:8080", false},              // B on another Machine
		{b1, "", "10.98.2.5:8080", true},               // B to B over the mesh
		{remote, "10.98.2.5", "10.98.1.3:8080", true},  // B arriving over the mesh
		{remote, "10.98.2.5", "10.98.1.2:8080", false}, // B arriving at A
		{remote, "10.98.2.1", "10.98.1.2:8080", true},  // a Machine (ingress)
		{remote, "10.98.2.5", "10.98.1.1:9000", true},  // a published port
		{a1, "", "10.98.2.1:8080", true},               // to a Machine
		{"pzca2" + id, "", "10.98.1.2:8080", true},     // A to A
		{"pzca2" + id, "", "10.98.1.3:8080", false},    // A to B
	})

	// 10.98.1.3 leaves B and joins A (an address reused), and B's last
	// local member goes: its chain goes with it once B is gone.
	iso.Networks = map[string][]netip.Addr{"A": addrs("10.98.1.2", "10.98.1.3", "10.98.1.4"), "B": addrs("10.98.2.5")}
	// S is gone too: A's .4 no longer reaches B's 10.98.2.5.
	inNS(t, machine, func() { err = EnsureIsolation(cfg, iso) })
	if err != nil {
		t.Fatal(err)
	}
	check("address reused by A", []flow{{a1, "", "10.98.1.3:8080", true}, {remote, "10.98.2.5", "10.98.1.3:8080", false},
		{"pzca2" + id, "", "10.98.2.5:8080", false}})
	delete(iso.Networks, "B")
	inNS(t, machine, func() { err = EnsureIsolation(cfg, iso) })
	if err != nil {
		t.Fatal(err)
	}
	check("B gone", []flow{{remote, "10.98.2.5", "10.98.1.3:8080", false}, {a1, "", "10.98.1.3:8080", true}})
	inNS(t, machine, func() {
		out, _ := exec.Command(iptablesCommand(), "-S").Output()
		if strings.Contains(string(out), networksChain(cfg, []string{"B"})) {
			t.Errorf("B's chain outlived B:\n%s", out)
		}
		err = EnsureForwarding(cfg) // a daemon restart keeps the membership
	})
	if err != nil {
		t.Fatal(err)
	}
	check("forwarding ensured again", []flow{{remote, "10.98.2.5", "10.98.1.3:8080", false}, {a1, "", "10.98.1.3:8080", true}})

	// A reboot: the kernel's rules are gone and the network is open, until
	// Docker's drop-in restores the saved membership before dockerd (with
	// FORWARD's jump to DOCKER-USER, which dockerd later replaces).
	saved := filepath.Join(t.TempDir(), SavedFile)
	if err := SaveIsolation(saved, cfg.Subnet, iso); err != nil {
		t.Fatal(err)
	}
	inNS(t, machine, func() {
		for _, tbl := range []string{"filter", "raw"} {
			exec.Command(iptablesCommand(), "-t", tbl, "-F").Run()
			exec.Command(iptablesCommand(), "-t", tbl, "-X").Run()
		}
	})
	check("rebooted, nothing restored", []flow{{remote, "10.98.2.5", "10.98.1.3:8080", true}})
	inNS(t, machine, func() {
		if err = RestoreSaved(Config{ChainPrefix: cfg.ChainPrefix, Bridge: cfg.Bridge, MeshInterface: cfg.MeshInterface}, saved); err != nil {
			return
		}
		out, _ := exec.Command(iptablesCommand(), "-S", "FORWARD").Output()
		if !strings.Contains(string(out), "-A FORWARD -j DOCKER-USER\n") {
			t.Errorf("after the restore FORWARD does not jump to DOCKER-USER:\n%s", out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	check("restored before dockerd", []flow{{remote, "10.98.2.5", "10.98.1.3:8080", false}, {a1, "", "10.98.1.3:8080", true},
		{remote, "10.98.2.1", "10.98.1.2:8080", true}})

	inNS(t, machine, func() {
		err = RemoveForwarding(cfg)
		if err != nil {
			return
		}
		out, _ := exec.Command(iptablesCommand(), "-S").Output()
		if strings.Contains(string(out), prefixOf(cfg)) {
			t.Errorf("chains left after RemoveForwarding:\n%s", out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	check("removed", []flow{{a1, "", "10.98.1.3:8080", true}, {remote, "10.98.2.5", "10.98.1.2:8080", true}})
}
