package dockernet

import (
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/prereq"
)

func TestRawRules(t *testing.T) {
	cfg := mustDefaults(t, Config{Subnet: netip.MustParsePrefix("10.210.7.0/24")})
	if got, want := rawChain(cfg), "PLOYZ-PREROUTING"; got != want {
		t.Errorf("chain %q, want %q", got, want)
	}
	want := [][]string{{"-i", "ployz-wg", "-d", "10.210.7.0/24", "-j", "ACCEPT"}}
	if got := rawRules(cfg); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("rules %q, want %q (mesh to this subnet only)", got, want)
	}
	if got := DockerDirectRoutingRule(netip.MustParseAddr("10.210.7.2"), "ployz-br"); strings.Join(got, " ") != "-d 10.210.7.2 ! -i ployz-br -j DROP" {
		t.Errorf("Docker's rule %q", got)
	}
}

// TestDirectRoutingDrops reads raw PREROUTING as iptables -S prints it
// with Docker 28.2+ (per Container, a trusted interface's ACCEPT before
// it), 28.0 (per published port) and its loopback filter beside ours.
func TestDirectRoutingDrops(t *testing.T) {
	const rules = `-P PREROUTING ACCEPT
-A PREROUTING -j PLOYZ-PREROUTING
-A PREROUTING -d 127.0.0.1/32 ! -i lo -p tcp -m tcp --dport 8080 -j DROP
-A PREROUTING -d 10.210.7.2/32 -i ployz-wg -j ACCEPT
-A PREROUTING -d 10.210.7.2/32 ! -i ployz-br -j DROP
-A PREROUTING -d 10.210.7.3/32 ! -i ployz-br -p tcp -m tcp --dport 80 -j DROP
-A PREROUTING -d 10.210.7.3/32 ! -i ployz-br -p tcp -m tcp --dport 443 -j DROP
-A PREROUTING -d 172.17.0.2/32 ! -i docker0 -j DROP
-A PREROUTING -d 10.210.7.9/32 ! -i br-other -j DROP
`
	got := DirectRoutingDrops(rules, "ployz-br", netip.MustParsePrefix("10.210.7.0/24"))
	want := []netip.Addr{netip.MustParseAddr("10.210.7.2"), netip.MustParseAddr("10.210.7.3")}
	if !slices.Equal(got, want) {
		t.Errorf("drops %v, want %v", got, want)
	}
	if got := DirectRoutingDrops("-P PREROUTING ACCEPT\n", "ployz-br", netip.MustParsePrefix("10.210.7.0/24")); len(got) != 0 {
		t.Errorf("Docker before 28: drops %v, want none", got)
	}
}

// TestDirectRoutingExemption builds a Machine namespace with a mesh link
// to a peer, a LAN link to a stranger and a "bridge" link to a Container,
// installs Docker 28's rule for the Container with the real iptables, and
// checks that the exemption lets the peer through (also past a rule
// appended after it, as the next Container start does) and nobody else.
func TestDirectRoutingExemption(t *testing.T) {
	prereq.Root(t, "network namespaces and iptables")
	for _, b := range []string{"ip", "iptables"} {
		prereq.Command(t, b)
	}
	n := newNSLab(t)
	id, machine, peer, stranger, lan, cfg := n.id, n.machine, n.peer, n.stranger, n.lan, n.cfg
	ctr := "pzc" + id
	addNS(t, ctr)
	ip(t, "link", "add", cfg.Bridge, "netns", machine, "type", "veth", "peer", "name", "eth0", "netns", ctr)
	for _, c := range [][]string{
		{machine, "addr", "add", "10.99.1.1/24", "dev", cfg.MeshInterface},
		{machine, "addr", "add", "10.99.2.1/24", "dev", lan},
		{machine, "addr", "add", "10.99.3.1/24", "dev", cfg.Bridge},
		{machine, "link", "set", cfg.MeshInterface, "up"}, {machine, "link", "set", lan, "up"}, {machine, "link", "set", cfg.Bridge, "up"},
		{peer, "addr", "add", "10.99.1.2/24", "dev", "pzq" + id}, {peer, "link", "set", "pzq" + id, "up"},
		{peer, "route", "add", "10.99.3.0/24", "via", "10.99.1.1"},
		{stranger, "addr", "add", "10.99.2.2/24", "dev", "pzo" + id}, {stranger, "link", "set", "pzo" + id, "up"},
		{stranger, "route", "add", "10.99.3.0/24", "via", "10.99.2.1"},
		{ctr, "addr", "add", "10.99.3.2/24", "dev", "eth0"}, {ctr, "link", "set", "eth0", "up"}, {ctr, "link", "set", "lo", "up"},
		{ctr, "route", "add", "default", "via", "10.99.3.1"},
	} {
		ip(t, append([]string{"-n", c[0]}, c[1:]...)...)
	}
	if out, err := exec.Command("ip", "netns", "exec", machine, "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		t.Fatalf("ip_forward: %v: %s", err, out)
	}
	var lis net.Listener
	inNS(t, ctr, func() {
		l, err := net.Listen("tcp", ":8080")
		if err != nil {
			t.Error(err)
			return
		}
		lis = l
		go acceptAndClose(l)
	})
	if lis == nil {
		t.FailNow()
	}
	defer lis.Close()
	reach := func(ns string) bool {
		ok := false
		inNS(t, ns, func() {
			c, err := net.DialTimeout("tcp", "10.99.3.2:8080", 700*time.Millisecond)
			if err == nil {
				c.Close()
				ok = true
			}
		})
		return ok
	}
	var bin string // the backend the package itself picks there
	inNS(t, machine, func() { bin = iptablesCommand() })
	iptablesIn := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"netns", "exec", machine, bin, "-w", "5"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("iptables %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	dockerRule := func(addr string) {
		iptablesIn(append([]string{"-t", "raw", "-A", "PREROUTING"}, DockerDirectRoutingRule(netip.MustParseAddr(addr), cfg.Bridge)...)...)
	}

	if !reach(peer) || !reach(stranger) {
		t.Fatal("before Docker's rule the Container is unreachable: the setup is wrong")
	}
	dockerRule("10.99.3.2")
	if reach(peer) || reach(stranger) {
		t.Fatal("Docker's rule does not drop direct-routed packets: the setup is wrong")
	}
	var err error
	for range 2 { // idempotent
		if inNS(t, machine, func() { err = EnsureDirectRouting(cfg) }); err != nil {
			t.Fatal(err)
		}
	}
	dockerRule("10.99.3.7") // a later Container start appends behind our jump
	if !reach(peer) {
		t.Error("the mesh peer cannot reach the Container through the exemption")
	}
	if reach(stranger) {
		t.Error("the stranger on the LAN reaches the Container: the exemption is wider than the mesh")
	}
	out := iptablesIn("-t", "raw", "-S", "PREROUTING")
	if strings.Count(out, "-j "+rawChain(cfg)) != 1 || !strings.HasPrefix(strings.SplitN(out, "\n", 3)[1], "-A PREROUTING -j "+rawChain(cfg)) {
		t.Errorf("raw PREROUTING after two ensures:\n%s", out)
	}
	if got := DirectRoutingDrops(out, cfg.Bridge, cfg.Subnet); len(got) != 2 {
		t.Errorf("DirectRoutingDrops = %v, want the 2 Containers", got)
	}

	if inNS(t, machine, func() { err = RemoveDirectRouting(cfg) }); err != nil {
		t.Fatal(err)
	}
	if reach(peer) {
		t.Error("after RemoveDirectRouting the mesh peer still passes Docker's rule")
	}
	if out := iptablesIn("-t", "raw", "-S"); strings.Contains(out, rawChain(cfg)) {
		t.Errorf("raw table after RemoveDirectRouting:\n%s", out)
	}
}
