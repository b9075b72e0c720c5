//go:build linux

package mesh

import (
	"bytes"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/meshaddr"
)

var (
	subnetA = netip.MustParsePrefix("10.210.1.0/24")
	subnetB = netip.MustParsePrefix("10.210.2.0/24")
)

const portA, portB = 51820, 51821

// startPair brings up A and B. A knows B by a dead candidate first and B's
// real endpoint second; B has no endpoint for A, so only A's rotation can
// make the tunnel come up (no roaming shortcut from B's side).
func (l *lab) startPair(timeout time.Duration) (a, b *child) {
	a = l.start(l.tb, l.nsA, childSpec{Iface: "pzwa" + l.id, Port: portA, Subnet: subnetA, StateFile: l.stateA, Timeout: timeout})
	b = l.start(l.tb, l.nsB, childSpec{Iface: "pzwb" + l.id, Port: portB, Subnet: subnetB, Timeout: timeout})
	l.setPeers(a, b)
	return a, b
}

func (l *lab) setPeers(a, b *child) {
	dead := netip.AddrPortFrom(netip.MustParseAddr("10.99.0.77"), portB)
	good := netip.AddrPortFrom(l.vethB, portB)
	a.call(request{Op: "peers", Peers: []Peer{{PublicKey: b.hello.PublicKey, Subnet: subnetB,
		Endpoints: []netip.AddrPort{dead, good}}}})
	b.call(request{Op: "peers", Peers: []Peer{{PublicKey: a.hello.PublicKey, Subnet: subnetA}}})
}

// waitHandshake polls c's status until its only peer has handshaken.
func waitHandshake(tb testing.TB, c *child, within time.Duration) PeerStatus {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		st := c.call(request{Op: "status"})
		if len(st.Peers) == 1 && !st.Peers[0].LastHandshake.IsZero() {
			return st.Peers[0]
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no handshake within %v: %+v", within, st.Peers)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestMeshLab(t *testing.T) {
	l := newLab(t)
	start := time.Now()
	a, b := l.startPair(2 * time.Second)
	if a.hello.Kind != KindUserspace || a.hello.Gateway != netip.MustParseAddr("10.210.1.1") {
		t.Fatalf("A hello = %+v", a.hello)
	}
	if a.hello.Mgmt != meshaddr.ManagementIP(a.hello.PublicKey) {
		t.Fatalf("A mgmt %v != derived", a.hello.Mgmt)
	}
	good := netip.AddrPortFrom(l.vethB, portB)

	t.Run("rotation", func(t *testing.T) {
		p := waitHandshake(t, a, 15*time.Second)
		if p.Endpoint != good {
			t.Fatalf("A's endpoint for B = %v, want %v", p.Endpoint, good)
		}
		t.Logf("handshake after rotation in %v", time.Since(start).Round(time.Millisecond))
		// The memory is written on the poll after the handshake.
		deadline := time.Now().Add(3 * time.Second)
		for {
			mem, err := LoadEndpointMemory(l.stateA)
			if err == nil && mem[b.hello.PublicKey.String()] == good {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("endpoint memory = %v, %v; want %v", mem, err, good)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("traffic", func(t *testing.T) {
		for _, dst := range []netip.Addr{b.hello.Mgmt, b.hello.Gateway} {
			echo(t, l.nsA, netip.AddrPortFrom(dst, echoPort))
		}
		for _, dst := range []netip.Addr{a.hello.Mgmt, a.hello.Gateway} {
			echo(t, l.nsB, netip.AddrPortFrom(dst, echoPort))
		}
		if _, err := exec.LookPath("wg"); err == nil {
			out, err := exec.Command("wg", "show", "pzwa"+l.id).CombinedOutput()
			if err != nil || !strings.Contains(string(out), b.hello.PublicKey.String()) {
				t.Fatalf("wg show over the UAPI socket: %v: %s", err, out)
			}
		}
		st := a.call(request{Op: "status"})
		if p := st.Peers[0]; p.RxBytes == 0 || p.TxBytes == 0 || p.Subnet != subnetB || p.ManagementIP != b.hello.Mgmt {
			t.Fatalf("A status peer = %+v", p)
		}
	})

	t.Run("containers across mesh", func(t *testing.T) { containersAcrossMesh(t, l) })

	t.Run("restart remembers endpoint", func(t *testing.T) {
		// A userspace device dies with its process (SIGKILL: no Down, the
		// UAPI socket file stays behind); a new Up recreates it and the
		// remembered endpoint is tried first.
		a.cmd.Process.Kill()
		a.cmd.Wait()
		// Registered on the parent test: a2 stays up for the subtests below.
		a2 := l.start(l.tb, l.nsA, childSpec{Iface: "pzwa" + l.id, Port: portA, Subnet: subnetA, StateFile: l.stateA, Timeout: 2 * time.Second})
		if a2.hello.PublicKey != a.hello.PublicKey {
			t.Fatal("key not reloaded from file")
		}
		t0 := time.Now()
		l.setPeers(a2, b)
		st := a2.call(request{Op: "status"})
		if c := st.Peers[0].Candidates; len(c) != 2 || c[0] != good {
			t.Fatalf("candidates after restart = %v, want %v first", c, good)
		}
		p := waitHandshake(t, a2, 5*time.Second)
		if p.Endpoint != good {
			t.Fatalf("endpoint after restart = %v", p.Endpoint)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("handshake took %v: remembered endpoint not tried first", d)
		}
		echo(t, l.nsA, netip.AddrPortFrom(b.hello.Mgmt, echoPort))
	})

	t.Run("second owner refused", func(t *testing.T) {
		// The interface is live in another process: Up must not steal it.
		_, errMsg := l.tryStart(t, l.nsA, childSpec{Iface: "pzwa" + l.id, Port: portA + 10, Subnet: subnetA, StateFile: l.stateA, NoServers: true})
		if !strings.Contains(errMsg, "already run by another process") {
			t.Fatalf("second Up on a live interface: %q", errMsg)
		}
	})

	t.Run("stale link replaced", func(t *testing.T) {
		// A persistent TUN with our name and no live owner is deleted and
		// recreated instead of blocking Up.
		name := "pzwc" + l.id
		l.ip("-n", l.nsA, "tuntap", "add", "mode", "tun", "name", name)
		c := l.start(t, l.nsA, childSpec{Iface: name, Port: portA + 20, Subnet: netip.MustParsePrefix("10.210.3.0/24"), StateFile: l.stateA, NoServers: true})
		if c.hello.Kind != KindUserspace {
			t.Fatalf("kind %v", c.hello.Kind)
		}
		c.stop()
		if out, _ := exec.Command("ip", "-n", l.nsA, "link", "show", name).CombinedOutput(); !strings.Contains(string(out), "does not exist") {
			t.Fatalf("link left after Down: %s", out)
		}
	})

	t.Run("remove peer", func(t *testing.T) {
		b.call(request{Op: "peers"})
		if st := b.call(request{Op: "status"}); len(st.Peers) != 0 {
			t.Fatalf("peers after removal: %+v", st.Peers)
		}
		if c, err := dialIn(l.nsB, "tcp", netip.AddrPortFrom(a.hello.Gateway, echoPort).String()); err == nil {
			c.Close()
			t.Fatal("A still reachable after removing the peer")
		}
	})
}

// echo checks a TCP round trip from namespace ns to dst over the tunnel.
func echo(t *testing.T, ns string, dst netip.AddrPort) {
	t.Helper()
	c, err := dialIn(ns, "tcp", dst.String())
	if err != nil {
		t.Fatalf("dial %v from %s: %v", dst, ns, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	msg := []byte("ployz mesh " + dst.String())
	c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := readFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo via %v from %s: %q, %v", dst, ns, got, err)
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
