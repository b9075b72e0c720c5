package dockernet

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// The rule lives in a chain of our own, rewritten whole on every ensure,
// so re-running is idempotent and removal never touches rules we did not add.
//
//	filter <prefix>-FORWARD (jumped from DOCKER-USER, or FORWARD without Docker):
//	  accept mesh → bridge and bridge → mesh; Docker's FORWARD policy is DROP
//	  and it only admits new connections into a bridge for published ports.
//	  after a jump to <prefix>-ISOLATE, which drops Container traffic
//	  between namespaces (isolate.go).
//	raw <prefix>-PREROUTING (jumped first from raw PREROUTING): exempts the
//	  mesh from Docker 28's direct-routing drops (raw.go).
//
// Container traffic to other Machines keeps Docker's MASQUERADE: it leaves
// as this Machine's .1, which ployz-wg holds. Builds before this one also
// exempted it in nat <prefix>-POSTROUTING; RemoveForwarding still deletes
// that chain where it exists.

// chains returns the filter and nat chain names for cfg.
func chains(cfg Config) (forward, postrouting string) {
	p := cfg.ChainPrefix
	if p == "" {
		p = "PLOYZ"
	}
	return p + "-FORWARD", p + "-POSTROUTING"
}

// EnsureForwarding installs the mesh ↔ bridge forwarding rules and enables
// IPv4 forwarding. Call it at daemon start: a dockerd that turned forwarding
// on itself set FORWARD's policy to DROP.
func EnsureForwarding(cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if err := enableSysctl("/proc/sys/net/ipv4/ip_forward", "1"); err != nil {
		return err
	}
	// Containers on one bridge reach each other through FORWARD (and so
	// meet the isolation) only with bridge netfilter on.
	if err := enableBridgeNetfilter(); err != nil {
		cfg.Logger.Named("dockernet").Warn("Containers on this Machine's bridge are not isolated from each other", "error", err)
	}
	if err := ensureIsolateChain(cfg); err != nil {
		return err
	}
	fwd, _ := chains(cfg)
	if err := writeChain("filter", fwd, [][]string{
		{"-j", isolateChain(cfg)},
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
	cfg.Logger.Named("dockernet").Debug("forwarding ensured", "bridge", cfg.Bridge, "mesh", cfg.MeshInterface, "parent", parent)
	// Docker 28's raw-table drops come before filter (raw.go).
	if err := EnsureDirectRouting(cfg); err != nil {
		return fmt.Errorf("direct routing exemption: %w", err)
	}
	return nil
}

// RemoveForwarding deletes the jumps and chains EnsureForwarding made
// (the raw exemption and the isolation chains too), and the nat exemption
// chain of earlier builds.
func RemoveForwarding(cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if err := RemoveDirectRouting(cfg); err != nil {
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
	return removeIsolation(cfg) // unreferenced now <prefix>-FORWARD is gone
}

// bridgeNetfilter is the sysctl that sends bridged IPv4 through iptables.
const bridgeNetfilter = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// enableBridgeNetfilter turns bridge netfilter on, loading br_netfilter
// where it is missing (dockerd usually loaded it already).
func enableBridgeNetfilter() error {
	if _, err := os.Stat(bridgeNetfilter); err != nil {
		if out, err := exec.Command("modprobe", "br_netfilter").CombinedOutput(); err != nil {
			return fmt.Errorf("modprobe br_netfilter: %w: %s", err, strings.TrimSpace(string(out)))
		}
	}
	return enableSysctl(bridgeNetfilter, "1")
}

// writeChain, jumpFirst and iptables drive the IPv4 binary of the backend
// Docker uses; input.go's xt does the work for both families.
func writeChain(table, chain string, rules [][]string) error {
	return ipv4().writeChain(table, chain, rules)
}

// jumpFirst makes "-j chain" the first rule of parent, exactly once.
func jumpFirst(table, parent, chain string) error { return ipv4().jumpFirst(table, parent, chain) }

// iptables runs the iptables variant Docker uses with the xtables lock
// wait, returning stdout.
func iptables(args ...string) (string, error) { return ipv4().run(args...) }

func ipv4() xt { return xt{iptablesCommand()} }

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
