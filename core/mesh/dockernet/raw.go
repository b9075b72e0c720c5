package dockernet

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Docker 28 drops packets addressed straight to a Container's IP unless
// they arrive on the Container's own bridge ("direct routing"
// protection): 28.0 and 28.1 per published port, 28.2 and later one rule
// per Container, appended to raw PREROUTING as the Container starts:
//
//	-A PREROUTING -d <container IP>/32 ! -i <bridge> -j DROP
//
// The raw table runs before filter, so the mesh ↔ bridge ACCEPT in
// <prefix>-FORWARD never sees those packets: a Container on another
// Machine, or the ingress proxy there, gets no answer. The exemption:
//
//	raw <prefix>-PREROUTING (jumped first from raw PREROUTING, IPv4 only;
//	Container addresses are IPv4):
//	  -i <mesh> -d <Machine subnet> -j ACCEPT
//
// ACCEPT in raw only ends the raw table's rules for the packet; filter
// still decides, so nothing is opened beyond what <prefix>-FORWARD
// already lets through, and only packets from the mesh interface to this
// Machine's own subnet skip Docker's drops. Docker appends its rules and
// never inserts ahead of others in raw PREROUTING, so a jump kept first
// stays ahead of every rule a later Container start adds. Dockers before
// 28 have no such rules: the chain is installed anyway (harmless, and
// ready for a Docker upgrade that does not restart ployzd).

// rawChain names the exemption chain in the raw table.
func rawChain(cfg Config) string {
	p := cfg.ChainPrefix
	if p == "" {
		p = "PLOYZ"
	}
	return p + "-PREROUTING"
}

// rawRules are the exemption chain's rules.
func rawRules(cfg Config) [][]string {
	return [][]string{{"-i", cfg.MeshInterface, "-d", cfg.Subnet.String(), "-j", "ACCEPT"}}
}

// EnsureDirectRouting installs the raw exemption for mesh traffic to the
// Machine subnet and keeps its jump first in raw PREROUTING. Idempotent.
func EnsureDirectRouting(cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	chain := rawChain(cfg)
	if err := writeChain("raw", chain, rawRules(cfg)); err != nil {
		return err
	}
	if err := jumpFirst("raw", "PREROUTING", chain); err != nil {
		return err
	}
	log := cfg.Logger.Named("dockernet")
	if out, err := iptables("-t", "raw", "-S", "PREROUTING"); err == nil {
		if drops := DirectRoutingDrops(out, cfg.Bridge, cfg.Subnet); len(drops) > 0 {
			log.Info("Docker drops direct-routed packets to Containers; the mesh is exempt", "containers", len(drops), "chain", "raw "+chain)
		}
	}
	log.Debug("direct routing exemption ensured", "chain", chain, "mesh", cfg.MeshInterface, "subnet", cfg.Subnet)
	return nil
}

// RemoveDirectRouting deletes what EnsureDirectRouting made. It needs
// only cfg.ChainPrefix, so a reset can run it without a subnet.
func RemoveDirectRouting(cfg Config) error {
	chain := rawChain(cfg)
	for {
		if _, err := iptables("-t", "raw", "-D", "PREROUTING", "-j", chain); err != nil {
			break // no (more) jumps, or no raw table
		}
	}
	if _, err := iptables("-t", "raw", "-S", chain); err != nil {
		return nil
	}
	if _, err := iptables("-t", "raw", "-F", chain); err != nil {
		return fmt.Errorf("iptables raw %s: flush: %w", chain, err)
	}
	if _, err := iptables("-t", "raw", "-X", chain); err != nil {
		return fmt.Errorf("iptables raw %s: delete: %w", chain, err)
	}
	return nil
}

// DirectRoutingDrops returns the Container addresses in subnet that
// Docker's direct-routing protection guards, read from `iptables -t raw
// -S PREROUTING` output: rules dropping packets to one address that do not
// arrive on bridge (28.2+ per Container, 28.0–28.1 per published port,
// each address once).
func DirectRoutingDrops(rules, bridge string, subnet netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, l := range strings.Split(rules, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "-A" || f[1] != "PREROUTING" || !hasSeq(f, "!", "-i", bridge) || !hasSeq(f, "-j", "DROP") {
			continue
		}
		for i := range f[:len(f)-1] {
			if f[i] != "-d" {
				continue
			}
			p, err := netip.ParsePrefix(f[i+1])
			if err != nil {
				if a, aerr := netip.ParseAddr(f[i+1]); aerr == nil {
					p = netip.PrefixFrom(a, a.BitLen())
				}
			}
			if p.IsValid() && p.IsSingleIP() && subnet.Contains(p.Addr()) && !slices.Contains(out, p.Addr()) {
				out = append(out, p.Addr())
			}
		}
	}
	return out
}

// DockerDirectRoutingRule is the rule Docker 28.2+ appends to raw
// PREROUTING for a Container at addr on bridge (iptables arguments after
// the chain), for tests that reproduce it where Docker 28 is not installed.
func DockerDirectRoutingRule(addr netip.Addr, bridge string) []string {
	return []string{"-d", addr.String(), "!", "-i", bridge, "-j", "DROP"}
}

func hasSeq(f []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(f); i++ {
		if strings.Join(f[i:i+len(seq)], " ") == strings.Join(seq, " ") {
			return true
		}
	}
	return false
}
