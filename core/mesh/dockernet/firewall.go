package dockernet

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// The rules live in two chains of our own, rewritten whole on every ensure,
// so re-running is idempotent and removal never touches rules we did not add.
//
//	filter <prefix>-FORWARD (jumped from DOCKER-USER, or FORWARD without Docker):
//	  accept mesh → bridge and bridge → mesh; Docker's FORWARD policy is DROP
//	  and it only admits new connections into a bridge for published ports.
//	nat <prefix>-POSTROUTING (jumped first from POSTROUTING):
//	  ACCEPT (= do not NAT) bridge subnet → cluster network, so a container's
//	  own address reaches other Machines instead of Docker's MASQUERADE
//	  rewriting it to this host's address. Internet-bound traffic still goes
//	  through Docker's MASQUERADE.

// chains returns the filter and nat chain names for cfg.
func chains(cfg Config) (forward, postrouting string) {
	p := cfg.ChainPrefix
	if p == "" {
		p = "PLOYZ"
	}
	return p + "-FORWARD", p + "-POSTROUTING"
}

// EnsureForwarding installs the mesh ↔ bridge forwarding rules and the NAT
// exemption for the cluster network, and enables IPv4 forwarding. Call it at
// daemon start and again after dockerd restarts: Docker may insert its own
// MASQUERADE rule ahead of our jump, which this puts back in front.
func EnsureForwarding(cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if err := enableSysctl("/proc/sys/net/ipv4/ip_forward", "1"); err != nil {
		return err
	}
	fwd, post := chains(cfg)
	sub, cluster := cfg.Subnet.String(), cfg.ClusterNetwork.String()
	if err := writeChain("filter", fwd, [][]string{
		{"-i", cfg.MeshInterface, "-o", cfg.Bridge, "-j", "ACCEPT"},
		{"-i", cfg.Bridge, "-o", cfg.MeshInterface, "-j", "ACCEPT"},
	}); err != nil {
		return err
	}
	parent := "DOCKER-USER"
	if _, err := iptables("-t", "filter", "-S", parent); err != nil {
		parent = "FORWARD" // no Docker chains yet: hook FORWARD directly
	}
	if err := jumpFirst("filter", parent, fwd); err != nil {
		return err
	}
	if err := writeChain("nat", post, [][]string{
		{"-s", sub, "-d", cluster, "-j", "ACCEPT"},
	}); err != nil {
		return err
	}
	if err := jumpFirst("nat", "POSTROUTING", post); err != nil {
		return err
	}
	cfg.Logger.Named("dockernet").Debug("forwarding ensured", "bridge", cfg.Bridge, "mesh", cfg.MeshInterface, "subnet", sub)
	return nil
}

// RemoveForwarding deletes the jumps and chains EnsureForwarding made.
func RemoveForwarding(cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	fwd, post := chains(cfg)
	for _, h := range []struct{ table, parent, chain string }{
		{"filter", "DOCKER-USER", fwd}, {"filter", "FORWARD", fwd}, {"nat", "POSTROUTING", post},
	} {
		for {
			if _, err := iptables("-t", h.table, "-D", h.parent, "-j", h.chain); err != nil {
				break // no (more) jumps, or no such parent chain
			}
		}
	}
	for _, c := range []struct{ table, chain string }{{"filter", fwd}, {"nat", post}} {
		if _, err := iptables("-t", c.table, "-S", c.chain); err != nil {
			continue
		}
		if _, err := iptables("-t", c.table, "-F", c.chain); err != nil {
			return fmt.Errorf("iptables %s %s: flush: %w", c.table, c.chain, err)
		}
		if _, err := iptables("-t", c.table, "-X", c.chain); err != nil {
			return fmt.Errorf("iptables %s %s: delete: %w", c.table, c.chain, err)
		}
	}
	return nil
}

// writeChain creates chain if needed and replaces its rules with rules.
func writeChain(table, chain string, rules [][]string) error {
	if _, err := iptables("-t", table, "-S", chain); err != nil {
		if _, err := iptables("-t", table, "-N", chain); err != nil {
			return fmt.Errorf("iptables %s %s: create: %w", table, chain, err)
		}
	}
	if _, err := iptables("-t", table, "-F", chain); err != nil {
		return fmt.Errorf("iptables %s %s: flush: %w", table, chain, err)
	}
	for _, r := range rules {
		if _, err := iptables(slices.Concat([]string{"-t", table, "-A", chain}, r)...); err != nil {
			return fmt.Errorf("iptables %s %s: add %v: %w", table, chain, r, err)
		}
	}
	return nil
}

// jumpFirst makes "-j chain" the first rule of parent, exactly once.
func jumpFirst(table, parent, chain string) error {
	out, err := iptables("-t", table, "-S", parent)
	if err != nil {
		return fmt.Errorf("iptables %s %s: list: %w", table, parent, err)
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
	// Misplaced or duplicated: delete every copy, then insert one in front.
	for slices.Contains(rules, jump) {
		if _, err := iptables("-t", table, "-D", parent, "-j", chain); err != nil {
			break
		}
	}
	if _, err := iptables("-t", table, "-I", parent, "1", "-j", chain); err != nil {
		return fmt.Errorf("iptables %s %s: insert jump to %s: %w", table, parent, chain, err)
	}
	return nil
}

// iptables runs the iptables variant Docker uses (iptablesCommand) with the
// xtables lock wait, returning stdout.
func iptables(args ...string) (string, error) {
	cmd := exec.Command(iptablesCommand(), append([]string{"-w", "5"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// enableSysctl writes want to a sysctl file unless it already holds it, so a
// host whose /proc/sys is read-only but already set up (a container Machine)
// is not refused.
func enableSysctl(path, want string) error {
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == want {
		return nil
	}
	if err := os.WriteFile(path, []byte(want+"\n"), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", path, want, err)
	}
	return nil
}
