package e2e

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	miekg "github.com/miekg/dns"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store/crdt"
	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/internal/prereq"
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
			"/run/ployz/store":                 "700 root",
			storeSocket:                        "600 root",
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
		// The store's API: its socket refuses nobody, and no TCP port
		// serves it that another user could take over while it is down.
		for _, cmd := range [][]string{
			{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "curl", "-sS", "--unix-socket", storeSocket, "http://store/v1/health"},
			{"curl", "-sS", "http://127.0.0.1:7571/v1/health"},
		} {
			if out, err := l.Exec(ctx, m1.Name, cmd...); err == nil {
				t.Errorf("%v was answered:\n%s", cmd, out)
			}
		}
	})

	// A local user cannot take a port above 1024 while the process
	// serving it restarts (issue 43): the sockets stay in the fd store.
	t.Run("restart-gap", func(t *testing.T) {
		restartGap(ctx, t, l, m1, in.ManagementIP)
	})

	t.Run("non-member-on-the-lab-network", func(t *testing.T) {
		subnet := netip.MustParsePrefix(in.Subnet)
		gw := subnet.Addr().Next()
		// This host is on the lab network but not in the Cluster: it
		// routes the Machine's subnet via the Machine, as a LAN neighbour
		// can. Without that route the attack is not made: a failure.
		prereq.Root(t, "a route on the lab host")
		if out, err := exec.Command("ip", "route", "add", subnet.String(), "via", m1.IP.String()).CombinedOutput(); err != nil {
			t.Fatalf("set up the attack: route %s via %s: %v: %s", subnet, m1.IP, err, out)
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

	t.Run("non-member-gossip", func(t *testing.T) {
		nonMemberGossip(ctx, t, l, m1, in.ManagementIP)
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

// gossipEnvelope has the fields of the store's peer message (gob matches
// fields by name), so a forged changeset is exactly what a member sends.
type gossipEnvelope struct {
	Kind       uint8
	From       string
	Changesets []crdt.Changeset
}

const forgedSite = "00000000000000000000000000000bad"

// forgedGossip is a changeset from a made-up site inserting cluster row
// 'forged': what a non-member would inject if gossip took anyone's word.
func forgedGossip(t *testing.T) []byte {
	t.Helper()
	pk := `["forged"]`
	cs := crdt.Changeset{Site: forgedSite, Version: 1, LastVersion: 1, Changes: []crdt.Change{
		{Table: "cluster", PK: pk, Col: crdt.SentinelCol, CL: 1, ColVersion: 1},
		{Table: "cluster", PK: pk, Col: "body", Val: crdt.Value{K: crdt.KindText, S: `{"name":"pwned"}`}, ColVersion: 1, CL: 1, Seq: 1},
	}}
	var buf bytes.Buffer
	buf.WriteByte('P')
	if err := gob.NewEncoder(&buf).Encode(gossipEnvelope{Kind: 1, From: forgedSite, Changesets: []crdt.Changeset{cs}}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// storeState is what a refused gossip attempt must leave unchanged on
// Machine name: the store's sites, the cluster table and the members.
func storeState(ctx context.Context, t *testing.T, l *lab.Lab, name string) string {
	t.Helper()
	api := func(path, body string) string {
		args := []string{"curl", "-sS", "--unix-socket", storeSocket, "-H", "Content-Type: application/json"}
		if body != "" {
			args = append(args, "-d", body)
		}
		out, err := l.Exec(ctx, name, append(args, "http://store"+path)...)
		if err != nil {
			t.Fatalf("store API %s on %s: %v: %s", path, name, err, out)
		}
		return out
	}
	var h struct {
		Vector map[string]int64 `json:"vector"`
	}
	if err := json.Unmarshal([]byte(api("/v1/health", "")), &h); err != nil {
		t.Fatalf("health: %v", err)
	}
	var sites []string
	for s := range h.Vector {
		sites = append(sites, s)
	}
	slices.Sort(sites)
	var ms rpc.Membership
	if err := localJSON(ctx, l, name, &ms, "machine", "rtt"); err != nil {
		t.Fatalf("membership on %s: %v", name, err)
	}
	var members []string
	for _, m := range ms.Members {
		members = append(members, m.ID+"@"+m.Addr)
	}
	slices.Sort(members)
	rows := api("/v1/queries", `{"query":"SELECT id, owner, body FROM cluster ORDER BY id"}`)
	// The answer's eoq line carries a timing: keep the rows only.
	var kept []string
	for _, line := range strings.Split(rows, "\n") {
		if strings.HasPrefix(line, `{"row"`) {
			kept = append(kept, line)
		}
	}
	return fmt.Sprintf("sites %v\nmembers %v\ncluster rows %v", sites, members, kept)
}

// nonMemberGossip attacks store gossip from this host, which is on the lab
// network but not in the Cluster: it gets an IPv6 route to the Machine's
// management address over the lab network (as a LAN neighbour could),
// then sends a forged changeset datagram and tries a memberlist join —
// first against the INPUT filter, then with the filter opened for it, so
// memberlist's own key check is what refuses. Nothing may change.
func nonMemberGossip(ctx context.Context, t *testing.T, l *lab.Lab, m *lab.Machine, mgmt string) {
	const hostIP, machineIP = "fd99:1ab::1", "fd99:1ab::2"
	prereq.Root(t, "addresses and routes on the lab host")
	id, err := exec.Command("docker", "network", "inspect", "-f", "{{.Id}}", l.Network).Output()
	if err != nil || len(strings.TrimSpace(string(id))) < 12 {
		t.Fatalf("lab network id: %v", err)
	}
	br := "br-" + strings.TrimSpace(string(id))[:12]
	// A step of the setup that fails leaves the attack unmade: a failure.
	host := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("set up the attack: %v: %v: %s", args, err, out)
		}
	}
	host("sysctl", "-qw", "net.ipv6.conf."+br+".disable_ipv6=0")
	host("ip", "-6", "addr", "add", hostIP+"/64", "dev", br, "nodad")
	defer exec.Command("ip", "-6", "addr", "del", hostIP+"/64", "dev", br).Run()
	// The Machine's /proc/sys is read-only inside its container: its
	// lab interface is given IPv6 from this host, in its network namespace.
	pid, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", m.Container).Output()
	if err != nil {
		t.Fatalf("%s: pid: %v", m.Name, err)
	}
	inNS := func(args ...string) []string {
		return append([]string{"nsenter", "-t", strings.TrimSpace(string(pid)), "-n"}, args...)
	}
	host(inNS("sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=0")...)
	host(inNS("ip", "-6", "addr", "add", machineIP+"/64", "dev", "eth0", "nodad")...)
	del := inNS("ip", "-6", "addr", "del", machineIP+"/64", "dev", "eth0")
	defer exec.Command(del[0], del[1:]...).Run()
	host("ip", "-6", "route", "add", mgmt+"/128", "via", machineIP)
	defer exec.Command("ip", "-6", "route", "del", mgmt+"/128", "via", machineIP).Run()
	if _, err := exec.LookPath("ping"); err == nil {
		eventually(t, 15*time.Second, "the management address answers ping over the lab network", func() error {
			return exec.Command("ping", "-6", "-c1", "-W1", mgmt).Run()
		})
	}

	target := net.JoinHostPort(mgmt, "7570")
	before := storeState(ctx, t, l, m.Name)
	attempt := func(phase string) {
		mc := memberlist.DefaultLANConfig()
		mc.Name = "intruder-" + strings.ReplaceAll(phase, " ", "-")
		mc.BindAddr, mc.BindPort, mc.AdvertisePort = hostIP, 0, 0
		mc.TCPTimeout = 2 * time.Second
		mc.LogOutput = io.Discard
		ml, err := memberlist.Create(mc)
		if err != nil {
			t.Fatalf("%s: attacker memberlist: %v", phase, err)
		}
		defer ml.Shutdown()
		to := &memberlist.Node{Name: "target", Addr: net.ParseIP(mgmt), Port: 7570}
		if err := ml.SendBestEffort(to, forgedGossip(t)); err != nil {
			t.Fatalf("%s: send the forged datagram: %v", phase, err)
		}
		if n, err := ml.Join([]string{target}); err == nil || n != 0 {
			t.Errorf("%s: memberlist join answered: joined %d, err %v", phase, n, err)
		}
		if got := len(ml.Members()); got != 1 {
			t.Errorf("%s: the intruder sees %d members, want only itself", phase, got)
		}
		t.Logf("%s: datagram sent, join refused", phase)
	}
	attempt("filtered")
	// The metrics endpoint has no authentication: only the mesh may reach
	// it. It listens (the Machine itself scrapes it), and the filter drops
	// a non-member's connection.
	metrics := net.JoinHostPort(mgmt, "9101")
	eventually(t, 60*time.Second, "the metrics endpoint answers on "+m.Name, func() error {
		_, err := l.Exec(ctx, m.Name, "curl", "-sf", "-g", "-o", "/dev/null", "http://"+metrics+"/metrics")
		return err
	})
	if c, err := net.DialTimeout("tcp", metrics, 3*time.Second); err == nil {
		c.Close()
		t.Errorf("a non-member on the lab network connected to the metrics endpoint %s", metrics)
	} else {
		t.Logf("metrics endpoint from a non-member: %v", err)
	}
	// Open the INPUT filter for this host only: now memberlist's key is
	// the only thing in the way.
	rule := []string{"PLOYZ-INPUT", "-s", hostIP, "-p", "all", "-j", "ACCEPT"}
	if out, err := l.Exec(ctx, m.Name, append([]string{"ip6tables", "-I"}, rule...)...); err != nil {
		t.Fatalf("open the filter: %v: %s", err, out)
	}
	defer l.Exec(ctx, m.Name, append([]string{"ip6tables", "-D"}, rule...)...)
	c, err := net.DialTimeout("tcp", target, 3*time.Second)
	if err != nil {
		t.Fatalf("control: gossip %s unreachable with the filter open: %v", target, err)
	}
	c.Close()
	attempt("past the filter")
	time.Sleep(2 * time.Second) // anything accepted would be applied by now
	if after := storeState(ctx, t, l, m.Name); after != before {
		t.Fatalf("store changed after refused gossip:\nbefore %s\nafter  %s", before, after)
	}
}
