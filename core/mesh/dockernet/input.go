package dockernet

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Input names the ports of this Machine that only Cluster sources may
// reach. A Machine forwards packets (weak host model, no IPv6 rp_filter),
// so a LAN neighbour routing a mesh address via it would otherwise reach
// the listeners bound to mesh addresses.
//
//	filter <prefix>-INPUT (jumped first from INPUT, iptables and ip6tables):
//	  loopback: RETURN (local users are refused by Machine RPC itself)
//	  MeshTCP/MeshUDP ports: ACCEPT on the mesh interface, DROP elsewhere
//	  DNS port: ACCEPT from the bridge and the mesh, DROP elsewhere
//
// Everything else RETURNs to the host's own INPUT rules untouched.
type Input struct {
	MeshTCP []int // e.g. Machine RPC 7569, gossip 7570
	MeshUDP []int // e.g. gossip 7570
	DNS     int   // Internal DNS, 0 for none
}

func inputChain(cfg Config) string {
	p := cfg.ChainPrefix
	if p == "" {
		p = "PLOYZ"
	}
	return p + "-INPUT"
}

// inputRules are the chain's rules, the same for both families.
func inputRules(cfg Config, in Input) [][]string {
	rules := [][]string{{"-i", "lo", "-j", "RETURN"}}
	port := func(proto string, p int, iface, verdict string) []string {
		r := []string{"-p", proto, "--dport", strconv.Itoa(p)}
		if iface != "" {
			r = append([]string{"-i", iface}, r...)
		}
		return append(r, "-j", verdict)
	}
	for _, set := range []struct {
		proto string
		ports []int
	}{{"tcp", in.MeshTCP}, {"udp", in.MeshUDP}} {
		for _, p := range set.ports {
			rules = append(rules, port(set.proto, p, cfg.MeshInterface, "ACCEPT"), port(set.proto, p, "", "DROP"))
		}
	}
	if in.DNS != 0 {
		for _, proto := range []string{"udp", "tcp"} {
			rules = append(rules,
				port(proto, in.DNS, cfg.Bridge, "ACCEPT"),
				port(proto, in.DNS, cfg.MeshInterface, "ACCEPT"),
				port(proto, in.DNS, "", "DROP"))
		}
	}
	return rules
}

// EnsureInput installs the <prefix>-INPUT chain in iptables and ip6tables
// and jumps to it first from INPUT. Idempotent: the chain is rewritten
// whole, and the jump kept first and single.
func EnsureInput(cfg Config, in Input) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	chain := inputChain(cfg)
	for _, x := range xtFamilies() {
		if err := x.writeChain("filter", chain, inputRules(cfg, in)); err != nil {
			return err
		}
		if err := x.jumpFirst("filter", "INPUT", chain); err != nil {
			return err
		}
	}
	cfg.Logger.Named("dockernet").Debug("input filter ensured", "chain", chain, "mesh", cfg.MeshInterface, "bridge", cfg.Bridge)
	return nil
}

// RemoveInput deletes what EnsureInput made, in both families. It needs
// only cfg.ChainPrefix, so a reset can run it without a subnet.
func RemoveInput(cfg Config) error {
	chain := inputChain(cfg)
	for _, x := range xtFamilies() {
		for {
			if _, err := x.run("-t", "filter", "-D", "INPUT", "-j", chain); err != nil {
				break // no (more) jumps
			}
		}
		if _, err := x.run("-t", "filter", "-S", chain); err != nil {
			continue
		}
		if _, err := x.run("-t", "filter", "-F", chain); err != nil {
			return fmt.Errorf("%s filter %s: flush: %w", x.bin, chain, err)
		}
		if _, err := x.run("-t", "filter", "-X", chain); err != nil {
			return fmt.Errorf("%s filter %s: delete: %w", x.bin, chain, err)
		}
	}
	return nil
}

// xt is one family's iptables binary.
type xt struct{ bin string }

// xtFamilies are the IPv4 and IPv6 binaries of the backend Docker uses
// (iptables.go), so the input filter never lands in the other ruleset.
func xtFamilies() []xt {
	v4 := iptablesCommand()
	return []xt{{v4}, {strings.Replace(v4, "iptables", "ip6tables", 1)}}
}

// run runs x with the xtables lock wait, returning stdout.
func (x xt) run(args ...string) (string, error) {
	cmd := exec.Command(x.bin, append([]string{"-w", "5"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", x.bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// writeChain creates chain if needed and replaces its rules with rules.
// A chain that already holds exactly rules is left alone: flushing it
// opens a window where new connections meet Docker's DROP, and ployzd
// rewrites its chains on every start (an upgrade restarts it twice).
func (x xt) writeChain(table, chain string, rules [][]string) error {
	if x.holds(table, chain, rules) {
		return nil
	}
	if _, err := x.run("-t", table, "-S", chain); err != nil {
		if _, err := x.run("-t", table, "-N", chain); err != nil {
			return fmt.Errorf("%s %s %s: create: %w", x.bin, table, chain, err)
		}
	}
	if _, err := x.run("-t", table, "-F", chain); err != nil {
		return fmt.Errorf("%s %s %s: flush: %w", x.bin, table, chain, err)
	}
	for _, r := range rules {
		if _, err := x.run(slices.Concat([]string{"-t", table, "-A", chain}, r)...); err != nil {
			return fmt.Errorf("%s %s %s: add %v: %w", x.bin, table, chain, r, err)
		}
	}
	return nil
}

// holds reports whether chain exists with exactly len(rules) rules, each
// of rules among them (iptables -C, which reads rules the way -A wrote them).
func (x xt) holds(table, chain string, rules [][]string) bool {
	out, err := x.run("-t", table, "-S", chain)
	if err != nil {
		return false
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A ") {
			n++
		}
	}
	if n != len(rules) {
		return false
	}
	for _, r := range rules {
		if _, err := x.run(slices.Concat([]string{"-t", table, "-C", chain}, r)...); err != nil {
			return false
		}
	}
	return true
}

// jumpFirst makes "-j chain" the first rule of parent, exactly once;
// a misplaced or duplicated jump is deleted and one inserted in front.
func (x xt) jumpFirst(table, parent, chain string) error {
	out, err := x.run("-t", table, "-S", parent)
	if err != nil {
		return fmt.Errorf("%s %s %s: list: %w", x.bin, table, parent, err)
	}
	jump := "-A " + parent + " -j " + chain
	var rules []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A ") {
			rules = append(rules, strings.TrimSpace(l))
		}
	}
	if len(rules) > 0 && rules[0] == jump && slices.Index(rules[1:], jump) < 0 {
		return nil
	}
	for slices.Contains(rules, jump) {
		if _, err := x.run("-t", table, "-D", parent, "-j", chain); err != nil {
			break
		}
	}
	if _, err := x.run("-t", table, "-I", parent, "1", "-j", chain); err != nil {
		return fmt.Errorf("%s %s %s: insert jump to %s: %w", x.bin, table, parent, chain, err)
	}
	return nil
}
