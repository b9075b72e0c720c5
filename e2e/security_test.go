package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	miekg "github.com/miekg/dns"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// TestSecurity attacks a Cluster Machine the way a stranger would: an
// unprivileged user on the Machine and a non-member on the lab network
// (this host, routing the Machine's subnet via its lab address). Every
// attempt is refused and changes nothing (issue 12).
func TestSecurity(t *testing.T) {
	needLab(t)
	l := lab.ForTest(t, 1)
	op := newOperator(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m1 := l.Machines[0]
	var in rpc.Inspection
	op.json(t, &in, "machine", "init", "root@"+m1.IP.String(), "--name", "m1")
	if in.Phase != "participating" || in.RPCKey == "" {
		t.Fatalf("init: phase %s, rpc_key %q", in.Phase, in.RPCKey)
	}
	before, err := lsFrom(ctx, l, m1.Name)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("file-modes", func(t *testing.T) {
		for path, want := range map[string]string{
			"/var/lib/ployz/rpc.key":           "600 root",
			"/var/lib/ployz/wireguard.key":     "600 root",
			"/run/ployz/ployz.sock":            "600 root",
			"/var/lib/ployz":                   "700 root",
			"/var/lib/ployz/machine-pins.json": "600 root",
		} {
			out, err := l.Exec(ctx, m1.Name, "stat", "-c", "%a %U", path)
			if err != nil || strings.TrimSpace(out) != want {
				t.Errorf("%s: %q, %v; want %s", path, strings.TrimSpace(out), err, want)
			}
		}
	})

	t.Run("unprivileged-user", func(t *testing.T) {
		asNobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "ployz"}
		out, err := l.Exec(ctx, m1.Name, append(asNobody, "--connect", "local", "machine", "ls")...)
		if err == nil || !strings.Contains(out, "permission denied") {
			t.Errorf("unix socket as nobody: %v\n%s", err, out)
		}
		mesh := "tcp://" + net.JoinHostPort(in.ManagementIP, "7569")
		for _, cmd := range [][]string{
			append(asNobody, "--connect", mesh, "machine", "ls"),
			{"ployz", "--connect", mesh, "machine", "ls"}, // root, but no RPC identity
		} {
			out, err := l.Exec(ctx, m1.Name, cmd...)
			if err == nil {
				t.Errorf("%v was answered:\n%s", cmd, out)
			}
		}
	})

	t.Run("non-member-on-the-lab-network", func(t *testing.T) {
		subnet := netip.MustParsePrefix(in.Subnet)
		gw := subnet.Addr().Next()
		// This host is on the lab network but not in the Cluster: it
		// routes the Machine's subnet via the Machine, as a LAN neighbour can.
		if out, err := exec.Command("ip", "route", "add", subnet.String(), "via", m1.IP.String()).CombinedOutput(); err != nil {
			t.Skipf("route %s via %s: %v: %s", subnet, m1.IP, err, out)
		}
		defer exec.Command("ip", "route", "del", subnet.String(), "via", m1.IP.String()).Run()
		// The route works: sshd, which the filter leaves alone, answers there.
		c, err := net.DialTimeout("tcp", net.JoinHostPort(gw.String(), "22"), 3*time.Second)
		if err != nil {
			t.Fatalf("control: %s:22 unreachable through the route: %v", gw, err)
		}
		c.Close()
		for _, proto := range []string{"udp", "tcp"} {
			m := new(miekg.Msg)
			m.SetQuestion("example.com.", miekg.TypeA)
			r, _, err := (&miekg.Client{Net: proto, Timeout: 2 * time.Second}).Exchange(m, net.JoinHostPort(gw.String(), "53"))
			if err == nil {
				t.Errorf("DNS over %s from a non-member answered: %s", proto, r)
			}
		}
	})

	after, err := lsFrom(ctx, l, m1.Name)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rows(before)) != fmt.Sprint(rows(after)) {
		t.Errorf("machines changed:\nbefore %v\nafter  %v", rows(before), rows(after))
	}
}

// rows is the identity part of a machine list, stable across observations.
func rows(l rpc.MachineList) []string {
	var out []string
	for _, m := range l.Machines {
		out = append(out, m.ID+"/"+m.Name+"/"+m.Phase+"/"+m.Subnet)
	}
	return out
}
