//go:build linux

package dockernet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/prereq"
)

// TestEnsure runs against the host's dockerd and iptables with names and a
// chain prefix of its own, and removes everything it made.
func TestEnsure(t *testing.T) {
	prereq.Root(t, "iptables and interfaces")
	prereq.Command(t, "iptables")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := NewClient()
	if err != nil {
		prereq.Missing(t, "a Docker client", err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		prereq.Missing(t, "a Docker daemon", err)
	}
	b := make([]byte, 3)
	rand.Read(b)
	id := hex.EncodeToString(b)
	cfg := Config{Name: "ployz-t-" + id, Bridge: "pzbr" + id, MeshInterface: "pzwg" + id,
		Subnet: freeSubnet(t, ctx), ChainPrefix: "PZT" + id}
	t.Cleanup(func() {
		RemoveNetwork(context.Background(), cli, cfg)
		RemoveForwarding(cfg)
		exec.Command("ip", "link", "del", cfg.MeshInterface).Run()
	})

	// Stand-in for the mesh interface holding the same .1 as a /32, as Up
	// does: Docker must still accept .1 as the bridge gateway.
	gw := cfg.Subnet.Addr().Next()
	for _, args := range [][]string{
		{"tuntap", "add", "mode", "tun", "name", cfg.MeshInterface},
		{"addr", "add", gw.String() + "/32", "dev", cfg.MeshInterface},
		{"link", "set", cfg.MeshInterface, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}

	id1, err := EnsureNetwork(ctx, cli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := EnsureNetwork(ctx, cli, cfg)
	if err != nil || id2 != id1 {
		t.Fatalf("second EnsureNetwork = %s, %v; want %s", id2, err, id1)
	}
	nw, err := cli.NetworkInspect(ctx, id1, networkInspectOptions())
	if err != nil || mismatch(nw, mustDefaults(t, cfg)) != "" {
		t.Fatalf("network = %+v, %v", nw.IPAM, err)
	}
	out, _ := exec.Command("ip", "-4", "addr", "show", "dev", cfg.Bridge).CombinedOutput()
	if !strings.Contains(string(out), gw.String()+"/24") {
		t.Fatalf("bridge %s lacks %s/24: %s", cfg.Bridge, gw, out)
	}

	for range 2 { // idempotent
		if err := EnsureForwarding(cfg); err != nil {
			t.Fatal(err)
		}
	}
	fwd, post := chains(cfg)
	if n := countRules(t, "filter", fwd); n != 3 {
		t.Errorf("%s has %d rules, want 3 (isolation, mesh → bridge, bridge → mesh)", fwd, n)
	}
	if first := firstRule(t, "filter", fwd); first != "-A "+fwd+" -j "+isolateChain(cfg) {
		t.Errorf("%s starts with %q, want the jump to isolation", fwd, first)
	}
	if first := firstRule(t, "filter", "DOCKER-USER"); first != "-A DOCKER-USER -j "+fwd {
		t.Errorf("DOCKER-USER starts with %q", first)
	}
	if first := firstRule(t, "raw", "PREROUTING"); first != "-A PREROUTING -j "+rawChain(cfg) {
		t.Errorf("raw PREROUTING starts with %q", first)
	}
	// Something inserted ahead of our jump is fixed by the next ensure.
	exec.Command("iptables", "-t", "filter", "-I", "DOCKER-USER", "1", "-s", cfg.Subnet.String(), "-j", "RETURN").Run()
	defer exec.Command("iptables", "-t", "filter", "-D", "DOCKER-USER", "-s", cfg.Subnet.String(), "-j", "RETURN").Run()
	if err := EnsureForwarding(cfg); err != nil {
		t.Fatal(err)
	}
	if first := firstRule(t, "filter", "DOCKER-USER"); first != "-A DOCKER-USER -j "+fwd {
		t.Errorf("after reorder DOCKER-USER starts with %q", first)
	}
	// The nat exemption an earlier build installed goes with a reset.
	for _, args := range [][]string{{"-t", "nat", "-N", post}, {"-t", "nat", "-A", post, "-s", cfg.Subnet.String(), "-j", "ACCEPT"}, {"-t", "nat", "-I", "POSTROUTING", "1", "-j", post}} {
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %v: %v: %s", args, err, out)
		}
	}

	// A changed subnet with no containers attached: recreated in place.
	moved := cfg
	moved.Subnet = freeSubnet(t, ctx)
	id3, err := EnsureNetwork(ctx, cli, moved)
	if err != nil || id3 == id1 {
		t.Fatalf("EnsureNetwork after subnet change = %s, %v", id3, err)
	}
	cfg = moved // cleanup removes the recreated network by name either way

	if err := RemoveForwarding(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := iptables("-t", "filter", "-S", fwd); err == nil {
		t.Errorf("%s still exists after RemoveForwarding", fwd)
	}
	if _, err := iptables("-t", "nat", "-S", post); err == nil {
		t.Errorf("%s still exists after RemoveForwarding", post)
	}
	if _, err := iptables("-t", "raw", "-S", rawChain(cfg)); err == nil {
		t.Errorf("raw %s still exists after RemoveForwarding", rawChain(cfg))
	}
	if _, err := iptables("-t", "filter", "-S", isolateChain(cfg)); err == nil {
		t.Errorf("%s still exists after RemoveForwarding", isolateChain(cfg))
	}
}

// freeSubnet picks a /24 in 10.210.200-254 no Docker network uses.
func freeSubnet(t *testing.T, ctx context.Context) netip.Prefix {
	b := make([]byte, 1)
	for range 20 {
		rand.Read(b)
		p := netip.MustParsePrefix(fmt.Sprintf("10.210.%d.0/24", 200+int(b[0])%55))
		out, _ := exec.Command("ip", "-4", "route", "show", p.String()).Output()
		if len(strings.TrimSpace(string(out))) == 0 {
			return p
		}
	}
	t.Fatal("no free test subnet")
	return netip.Prefix{}
}

func mustDefaults(t *testing.T, c Config) Config {
	c, err := c.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func countRules(t *testing.T, table, chain string) int {
	out, err := iptables("-t", table, "-S", chain)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(out, "-A "+chain+" ")
}

func firstRule(t *testing.T, table, chain string) string {
	out, err := iptables("-t", table, "-S", chain)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A ") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
