package e2e

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/mesh/dockernet"
	"github.com/ployz/ployz/e2e/lab"
)

// docker28Rules emulates Docker 28.2+'s direct-routing protection, which
// no Debian lab image ships: on every Machine it appends to raw
// PREROUTING, for each Container on the ployz network, exactly the rule
// Docker's bridge driver adds (no trusted-interface ACCEPT: that needs
// Docker 28.2+ to read the network option). Then a web Container reaches
// the web Container on the other Machine by IP over the mesh, and the
// ingress of the Machine without web reaches both. Without Ployz's raw
// exemption (PLOYZ-PREROUTING) every one of these is dropped.
func docker28Rules(t *testing.T, ctx context.Context, l *lab.Lab, webOn map[string]string) {
	ips := map[string]string{} // Machine name -> its web Container's ployz IP
	for _, m := range l.Machines {
		out, err := l.Exec(ctx, m.Name, "docker", "network", "inspect", "ployz", "-f", "{{range .Containers}}{{.IPv4Address}} {{end}}")
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		for _, f := range strings.Fields(out) {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				t.Fatalf("%s: container address %q: %v", m.Name, f, err)
			}
			rule := append([]string{"iptables", "-w", "5", "-t", "raw", "-A", "PREROUTING"}, dockernet.DockerDirectRoutingRule(p.Addr(), dockernet.DefaultBridge)...)
			if _, err := l.Exec(ctx, m.Name, rule...); err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
		}
		if id := webOn[m.Name]; id != "" {
			out, err := l.Exec(ctx, m.Name, "docker", "inspect", "-f", `{{(index .NetworkSettings.Networks "ployz").IPAddress}}`, id)
			if err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
			ips[m.Name] = strings.TrimSpace(out)
		}
		raw, _ := l.Exec(ctx, m.Name, "iptables", "-w", "5", "-t", "raw", "-S", "PREROUTING")
		t.Logf("%s raw PREROUTING:\n%s", m.Name, raw)
	}
	for from, id := range webOn {
		for to, ip := range ips {
			if to == from {
				continue
			}
			out, err := l.Exec(ctx, from, "docker", "exec", id, "/testapp", "get", "http://"+ip+":8080/")
			if err != nil || !strings.Contains(out, `"hostname":"`+webOn[to]+`"`) {
				t.Errorf("web on %s -> web on %s (%s) over the mesh: %q %v", from, to, ip, out, err)
			}
		}
	}
	for _, m := range l.Machines {
		if webOn[m.Name] != "" {
			continue
		}
		seen := map[string]bool{}
		for i := 0; i < 10; i++ {
			code, body, err := hostGet(m.IP.String(), "hello.example.test", "/")
			if err != nil || code != 200 {
				t.Errorf("ingress on %s (no web there) request %d: %d %q %v", m.Name, i, code, body, err)
				continue
			}
			for _, id := range webOn {
				if strings.Contains(body, `"hostname":"`+id+`"`) {
					seen[id] = true
				}
			}
		}
		t.Logf("ingress on %s reached %d remote web Containers", m.Name, len(seen))
		if len(seen) == 0 {
			t.Errorf("ingress on %s answered from no web Container", m.Name)
		}
	}

	// The control: without the exemption's jump the same request is
	// dropped, so the emulated rules really bite. Then it is put back.
	jump := func(op string) {
		for _, m := range l.Machines {
			args := []string{"iptables", "-w", "5", "-t", "raw", op, "PREROUTING"}
			if op == "-I" {
				args = append(args, "1")
			}
			if _, err := l.Exec(ctx, m.Name, append(args, "-j", "PLOYZ-PREROUTING")...); err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
		}
	}
	jump("-D")
	for from, id := range webOn {
		for to, ip := range ips {
			if to != from {
				if out, err := l.Exec(ctx, from, "docker", "exec", id, "/testapp", "get", "http://"+ip+":8080/"); err == nil {
					t.Errorf("without the exemption web on %s still reaches %s: %q (the emulated rules do not bite)", from, to, out)
				}
				break
			}
		}
		break
	}
	jump("-I")
}
