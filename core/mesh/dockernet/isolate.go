package dockernet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
)

// Namespace isolation: a Container reaches the Containers that share one
// of its networks (by default the one network of its namespace) and
// nothing else of the Cluster network's Containers. It is
// enforced where the packet is forwarded with its true source, which for
// a Container is always its own Machine: traffic to another Machine
// leaves masqueraded as the Machine's .1 (firewall.go), so the receiving
// Machine sees a Machine, not a Container. A Container source arriving
// over the mesh unmasqueraded meets the same rules.
//
//	filter <prefix>-ISOLATE (jumped first from <prefix>-FORWARD):
//	  ctstate DNAT: RETURN              published host ports stay public
//	  ! -d <network>: RETURN            not to a Container
//	  ! -s <network>: RETURN            not from a Container
//	  -d <any Machine .1>: RETURN       to a Machine (its DNS, ingress, RPC)
//	  -s <any Machine .1>: RETURN       from a Machine (ingress, masqueraded)
//	  -s/-d <open address>: RETURN      a container the operator runs by hand
//	  -s <address> -g <prefix>-NS-<hash of its networks>   for every member
//	  DROP                              an unknown Container address
//	filter <prefix>-NS-<hash>, one per set of networks some address is on:
//	  -d <member of any of them>: RETURN
//	  DROP
//
// The chains are rewritten in one iptables-restore commit, so a change
// (an address leaving namespace B and joining A) is never seen half
// done, and no namespace chain is ever empty of its DROP.

// Isolation is the membership the rules enforce: each network's Container
// addresses (an address may be on several), within Cluster (the Cluster
// network, whose /24s' .1 addresses are Machines). Open are the addresses of containers
// outside every namespace (no namespace label: run by hand by someone
// with Docker on a Machine, as trusted as the Machine): they reach and
// are reached by everything.
type Isolation struct {
	Cluster  netip.Prefix
	Networks map[string][]netip.Addr
	Open     []netip.Addr
}

// Key is a canonical form of iso, equal for equal memberships.
func (iso Isolation) Key() string {
	var b strings.Builder
	b.WriteString(iso.Cluster.String())
	b.WriteString("\nopen=")
	for _, a := range sortedAddrs(iso.Open) {
		b.WriteString(a.String() + ",")
	}
	for _, n := range iso.names() {
		fmt.Fprintf(&b, "\n%s=", n)
		for _, a := range sortedAddrs(iso.Networks[n]) {
			b.WriteString(a.String() + ",")
		}
	}
	return b.String()
}

// Addresses counts the distinct member addresses.
func (iso Isolation) Addresses() int { return len(iso.memberships()) }

func (iso Isolation) names() []string {
	names := make([]string, 0, len(iso.Networks))
	for n := range iso.Networks {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// memberships maps each member address to the sorted networks it is on.
func (iso Isolation) memberships() map[netip.Addr][]string {
	m := map[netip.Addr][]string{}
	for _, n := range iso.names() {
		for _, a := range sortedAddrs(iso.Networks[n]) {
			m[a] = append(m[a], n)
		}
	}
	return m
}

// reach is one set of networks some address is on: its chain lets that
// address reach every member of any of them.
type reach struct {
	chain   string
	members []netip.Addr
}

// reaches groups the member addresses by their set of networks, each set
// with its chain; ordered by chain name, and the addresses by address.
func (iso Isolation) reaches(cfg Config) (map[netip.Addr]string, []reach) {
	byAddr := map[netip.Addr]string{}
	sets := map[string]reach{}
	for a, nets := range iso.memberships() {
		c := networksChain(cfg, nets)
		byAddr[a] = c
		if _, ok := sets[c]; ok {
			continue
		}
		var members []netip.Addr
		for _, n := range nets {
			members = append(members, iso.Networks[n]...)
		}
		sets[c] = reach{chain: c, members: sortedAddrs(members)}
	}
	out := make([]reach, 0, len(sets))
	for _, r := range sets {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b reach) int { return strings.Compare(a.chain, b.chain) })
	return byAddr, out
}

func sortedAddrs(as []netip.Addr) []netip.Addr {
	out := slices.Clone(as)
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}

// isolateChain names the entry chain.
func isolateChain(cfg Config) string { return prefixOf(cfg) + "-ISOLATE" }

// NamespaceChainPrefix is what every namespace chain's name starts with.
func NamespaceChainPrefix(chainPrefix string) string {
	return prefixOf(Config{ChainPrefix: chainPrefix}) + "-NS-"
}

// networksChain names the chain of a set of networks (sorted): a hash,
// since network names may be longer than iptables' 28 bytes. A single
// network's chain hashes its name alone.
func networksChain(cfg Config, nets []string) string {
	h := sha256.Sum256([]byte(strings.Join(nets, "\x00")))
	return NamespaceChainPrefix(cfg.ChainPrefix) + hex.EncodeToString(h[:6])
}

func prefixOf(cfg Config) string {
	if cfg.ChainPrefix == "" {
		return "PLOYZ"
	}
	return cfg.ChainPrefix
}

// machineAddrs matches the .1 of every /24 in network: the Machines'
// bridge gateways and mesh sources (a non-contiguous mask).
func machineAddrs(network netip.Prefix) string {
	network = network.Masked()
	a := network.Addr().As4()
	a[3] = 1
	m := uint32(0xffffffff) << (32 - network.Bits())
	m |= 0xff
	return fmt.Sprintf("%s/%d.%d.%d.%d", netip.AddrFrom4(a), byte(m>>24), byte(m>>16), byte(m>>8), byte(m))
}

// isolationRestore is the iptables-restore input that makes the chains
// hold iso, deleting the namespace chains in stale that iso no longer
// has. Pure: the golden test pins it.
func isolationRestore(cfg Config, iso Isolation, stale []string) string {
	var b bytes.Buffer
	entry := isolateChain(cfg)
	byAddr, sets := iso.reaches(cfg)
	want := map[string]bool{}
	for _, r := range sets {
		want[r.chain] = true
	}
	var gone []string
	for _, c := range stale {
		if !want[c] && !slices.Contains(gone, c) {
			gone = append(gone, c)
		}
	}
	// Declaring a chain flushes it: the entry chain and the stale ones
	// (a chain is deleted empty and unreferenced).
	b.WriteString("*filter\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n", entry)
	for _, r := range sets {
		fmt.Fprintf(&b, ":%s - [0:0]\n", r.chain)
	}
	for _, c := range gone {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, r := range sets {
		for _, a := range r.members {
			fmt.Fprintf(&b, "-A %s -d %s/32 -j RETURN\n", r.chain, a)
		}
		fmt.Fprintf(&b, "-A %s -j DROP\n", r.chain)
	}
	cluster, machines := iso.Cluster.Masked().String(), machineAddrs(iso.Cluster)
	for _, r := range []string{
		"-m conntrack --ctstate DNAT -j RETURN",
		"! -d " + cluster + " -j RETURN",
		"! -s " + cluster + " -j RETURN",
		"-d " + machines + " -j RETURN",
		"-s " + machines + " -j RETURN",
	} {
		fmt.Fprintf(&b, "-A %s %s\n", entry, r)
	}
	for _, a := range sortedAddrs(iso.Open) {
		fmt.Fprintf(&b, "-A %s -s %s/32 -j RETURN\n-A %s -d %s/32 -j RETURN\n", entry, a, entry, a)
	}
	addrs := make([]netip.Addr, 0, len(byAddr))
	for a := range byAddr {
		addrs = append(addrs, a)
	}
	for _, a := range sortedAddrs(addrs) {
		fmt.Fprintf(&b, "-A %s -s %s/32 -g %s\n", entry, a, byAddr[a])
	}
	fmt.Fprintf(&b, "-A %s -j DROP\n", entry)
	for _, c := range gone {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// EnsureIsolation makes the chains enforce iso in one commit. The jump
// from <prefix>-FORWARD is EnsureForwarding's.
func EnsureIsolation(cfg Config, iso Isolation) error {
	if !iso.Cluster.IsValid() || !iso.Cluster.Addr().Is4() || iso.Cluster.Bits() > 24 {
		return fmt.Errorf("isolation cluster network %v: want an IPv4 prefix of /24 or wider", iso.Cluster)
	}
	x := ipv4()
	stale, err := x.chainsWithPrefix("filter", NamespaceChainPrefix(cfg.ChainPrefix))
	if err != nil {
		return err
	}
	return x.restore(isolationRestore(cfg, iso, stale))
}

// ensureIsolateChain creates the entry chain empty (allowing everything)
// where it does not exist, and leaves an existing one as it is: rules
// restored from the last membership, or kept by a ployzd restart, hold
// until the daemon has read the store.
func ensureIsolateChain(cfg Config) error {
	c := isolateChain(cfg)
	if _, err := iptables("-t", "filter", "-S", c); err == nil {
		return nil
	}
	if _, err := iptables("-t", "filter", "-N", c); err != nil {
		return fmt.Errorf("iptables filter %s: create: %w", c, err)
	}
	return nil
}

// removeIsolation deletes the entry chain and every namespace chain; the
// jump to it went with <prefix>-FORWARD.
func removeIsolation(cfg Config) error {
	x := ipv4()
	entry := isolateChain(cfg)
	if _, err := x.run("-t", "filter", "-S", entry); err == nil {
		if _, err := x.run("-t", "filter", "-F", entry); err != nil {
			return fmt.Errorf("iptables filter %s: flush: %w", entry, err)
		}
		if _, err := x.run("-t", "filter", "-X", entry); err != nil {
			return fmt.Errorf("iptables filter %s: delete: %w", entry, err)
		}
	}
	nss, err := x.chainsWithPrefix("filter", NamespaceChainPrefix(cfg.ChainPrefix))
	if err != nil {
		return err
	}
	for _, c := range nss {
		if _, err := x.run("-t", "filter", "-F", c); err != nil {
			return fmt.Errorf("iptables filter %s: flush: %w", c, err)
		}
		if _, err := x.run("-t", "filter", "-X", c); err != nil {
			return fmt.Errorf("iptables filter %s: delete: %w", c, err)
		}
	}
	return nil
}

// chainsWithPrefix lists table's user chains whose names start with p.
func (x xt) chainsWithPrefix(table, p string) ([]string, error) {
	out, err := x.run("-t", table, "-S")
	if err != nil {
		return nil, fmt.Errorf("%s %s: list: %w", x.bin, table, err)
	}
	var cs []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "-N" && strings.HasPrefix(f[1], p) {
			cs = append(cs, f[1])
		}
	}
	return cs, nil
}

// restore commits input with x's iptables-restore, leaving the chains it
// does not name alone (--noflush).
func (x xt) restore(input string) error {
	cmd := exec.Command(x.bin+"-restore", "-w", "--noflush")
	cmd.Stdin = strings.NewReader(input)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s-restore: %w: %s", x.bin, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
