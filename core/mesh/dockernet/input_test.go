package dockernet

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/ployz/ployz/internal/prereq"
)

// inNS runs fn on an OS thread inside network namespace name; processes
// fn starts (iptables) and sockets it opens live there.
func inNS(t *testing.T, name string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		h, err := netns.GetFromName(name)
		if err != nil {
			t.Error(err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			t.Error(err)
			return
		}
		fn()
	}()
	<-done
}

// nsLab is a Machine namespace linked to a mesh peer (veth cfg.MeshInterface
// ↔ pzq<id>) and to a LAN stranger (veth lan ↔ pzo<id>), all removed when
// the test ends; addresses and routes are each test's own.
type nsLab struct {
	id, machine, peer, stranger, lan string
	cfg                              Config
}

func newNSLab(t *testing.T) nsLab {
	b := make([]byte, 3)
	rand.Read(b)
	id := hex.EncodeToString(b)
	n := nsLab{id: id, machine: "pzm" + id, peer: "pzp" + id, stranger: "pzs" + id, lan: "pzln" + id,
		cfg: Config{MeshInterface: "pzwg" + id, Bridge: "pzbr" + id, ChainPrefix: "PZT" + id, Subnet: netip.MustParsePrefix("10.99.3.0/24")}}
	for _, ns := range []string{n.machine, n.peer, n.stranger} {
		addNS(t, ns)
	}
	ip(t, "link", "add", n.cfg.MeshInterface, "netns", n.machine, "type", "veth", "peer", "name", "pzq"+id, "netns", n.peer)
	ip(t, "link", "add", n.lan, "netns", n.machine, "type", "veth", "peer", "name", "pzo"+id, "netns", n.stranger)
	return n
}

// acceptAndClose answers every connection to l by closing it, until l closes.
func acceptAndClose(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// listenIn answers TCP connections on ports in network namespace ns (by
// closing them) until the test ends.
func listenIn(t *testing.T, ns string, ports ...string) {
	t.Helper()
	inNS(t, ns, func() {
		for _, p := range ports {
			l, err := net.Listen("tcp", ":"+p)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { l.Close() })
			go acceptAndClose(l)
		}
	})
}

// connects reports whether a TCP connection from namespace ns (from
// address src; "" for any) to addr is established within 700 ms.
func connects(t *testing.T, ns, src, addr string) bool {
	ok := false
	inNS(t, ns, func() {
		d := net.Dialer{Timeout: 700 * time.Millisecond}
		if src != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
		}
		if c, err := d.Dial("tcp", addr); err == nil {
			c.Close()
			ok = true
		}
	})
	return ok
}

func addNS(t *testing.T, ns string) {
	ip(t, "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// TestInputFilter builds a Machine namespace with a mesh link to a peer
// and a LAN link to a stranger that routes the mesh addresses via the
// Machine (the attack), installs the filter with the real iptables and
// ip6tables there, and connects from both sides.
func TestInputFilter(t *testing.T) {
	prereq.Root(t, "network namespaces and iptables")
	for _, b := range []string{"ip", "iptables", "ip6tables"} {
		prereq.Command(t, b)
	}
	n := newNSLab(t)
	id, machine, peer, stranger, lan, cfg := n.id, n.machine, n.peer, n.stranger, n.lan, n.cfg
	for _, c := range [][]string{
		{machine, "addr", "add", "10.99.1.1/24", "dev", cfg.MeshInterface},
		{machine, "addr", "add", "fd99:1::1/64", "dev", cfg.MeshInterface, "nodad"},
		{machine, "addr", "add", "10.99.2.1/24", "dev", lan},
		{machine, "addr", "add", "fd99:2::1/64", "dev", lan, "nodad"},
		{machine, "link", "set", cfg.MeshInterface, "up"}, {machine, "link", "set", lan, "up"}, {machine, "link", "set", "lo", "up"},
		{peer, "addr", "add", "10.99.1.2/24", "dev", "pzq" + id},
		{peer, "addr", "add", "fd99:1::2/64", "dev", "pzq" + id, "nodad"},
		{peer, "link", "set", "pzq" + id, "up"},
		{stranger, "addr", "add", "10.99.2.2/24", "dev", "pzo" + id},
		{stranger, "addr", "add", "fd99:2::2/64", "dev", "pzo" + id, "nodad"},
		{stranger, "link", "set", "pzo" + id, "up"},
		{stranger, "route", "add", "10.99.1.0/24", "via", "10.99.2.1"},
		{stranger, "-6", "route", "add", "fd99:1::/64", "via", "fd99:2::1"},
	} {
		ip(t, append([]string{"-n", c[0]}, c[1:]...)...)
	}

	// The Machine's listeners, on every address.
	listenIn(t, machine, "7569", "53", "8080")
	reach := func(ns, addr string) bool { return connects(t, ns, "", addr) }
	in := Input{MeshTCP: []int{7569, 7570}, MeshUDP: []int{7570}, DNS: 53}
	attack := []string{"10.99.1.1:7569", "[fd99:1::1]:7569", "10.99.2.1:7569", "[fd99:2::1]:7569", "10.99.1.1:53"}
	for _, a := range attack {
		if !reach(stranger, a) {
			t.Fatalf("before the filter the stranger cannot reach %s: the setup is wrong", a)
		}
	}

	var err error
	inNS(t, machine, func() { err = EnsureInput(cfg, in) })
	if err != nil {
		t.Fatal(err)
	}
	inNS(t, machine, func() { err = EnsureInput(cfg, in) }) // idempotent
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attack {
		if reach(stranger, a) {
			t.Errorf("the stranger on the LAN reaches %s through the filter", a)
		}
	}
	for _, a := range []string{"10.99.1.1:7569", "[fd99:1::1]:7569", "10.99.1.1:53"} {
		if !reach(peer, a) {
			t.Errorf("the mesh peer cannot reach %s", a)
		}
	}
	if !reach(stranger, "10.99.2.1:8080") || !reach(stranger, "[fd99:2::1]:8080") {
		t.Error("the filter blocks a port it does not own")
	}
	inNS(t, machine, func() {
		for _, bin := range []string{"iptables", "ip6tables"} {
			out, _ := exec.Command(bin, "-S", "INPUT").Output()
			if strings.Count(string(out), "-j "+inputChain(cfg)) != 1 || !strings.Contains(string(out), "-A INPUT -j "+inputChain(cfg)) {
				t.Errorf("%s INPUT after two ensures:\n%s", bin, out)
			}
		}
		err = RemoveInput(cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
	inNS(t, machine, func() {
		for _, bin := range []string{"iptables", "ip6tables"} {
			if out, err := exec.Command(bin, "-S", inputChain(cfg)).CombinedOutput(); err == nil {
				t.Errorf("%s chain still exists after RemoveInput:\n%s", bin, out)
			}
		}
	})
	if !reach(stranger, "10.99.1.1:7569") {
		t.Error("after RemoveInput the port is still filtered")
	}
}
