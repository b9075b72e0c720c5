//go:build linux

package mesh

import (
	"io"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"testing"

	"github.com/ployz/ployz/core/meshaddr"
	"github.com/vishvananda/netns"
)

// container stands in for a Docker container on the `ployz` bridge: a
// namespace behind a Linux bridge in the Machine namespace that owns the
// subnet's .1/24 — the same .1 the mesh interface carries as a /32 — with
// the .1 as default gateway. No NAT anywhere, so the test proves routing and
// allowed IPs carry container addresses end to end.
func (l *lab) container(t *testing.T, machineNS, tag string, subnet netip.Prefix) (string, netip.Addr) {
	t.Helper()
	ns := "pzm-c" + tag + "-" + l.id
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	gw, _ := meshaddr.Gateway(subnet)
	addr := gw.Next()
	br, vh := "pzbr"+tag+l.id, "pzvh"+tag+l.id
	l.ip("netns", "add", ns)
	l.ip("-n", machineNS, "link", "add", br, "type", "bridge")
	l.ip("-n", machineNS, "addr", "add", netip.PrefixFrom(gw, subnet.Bits()).String(), "dev", br)
	l.ip("-n", machineNS, "link", "set", br, "up")
	l.ip("-n", machineNS, "link", "add", vh, "type", "veth", "peer", "name", "eth0", "netns", ns)
	l.ip("-n", machineNS, "link", "set", vh, "master", br, "up")
	l.ip("-n", ns, "addr", "add", netip.PrefixFrom(addr, subnet.Bits()).String(), "dev", "eth0")
	l.ip("-n", ns, "link", "set", "eth0", "up")
	l.ip("-n", ns, "route", "add", "default", "via", gw.String())
	if out, err := exec.Command("ip", "netns", "exec", machineNS, "sh", "-c",
		"echo 1 > /proc/sys/net/ipv4/ip_forward").CombinedOutput(); err != nil {
		t.Fatalf("ip_forward in %s: %v: %s", machineNS, err, out)
	}
	return ns, addr
}

// listenIn opens a TCP listener inside namespace ns (see dialIn).
func listenIn(ns, addr string) (net.Listener, error) {
	type res struct {
		l   net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		h, err := netns.GetFromName(ns)
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- res{nil, err}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- res{ln, err}
	}()
	r := <-ch
	return r.l, r.err
}

// containersAcrossMesh connects container A to container B by IP and checks
// B saw A's own address (not its Machine's).
func containersAcrossMesh(t *testing.T, l *lab) {
	cA, addrA := l.container(t, l.nsA, "a", subnetA)
	cB, addrB := l.container(t, l.nsB, "b", subnetB)
	ln, err := listenIn(cB, ":8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan netip.Addr, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		seen <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		io.Copy(c, c)
	}()
	echo(t, cA, netip.AddrPortFrom(addrB, 8080))
	if got := <-seen; got != addrA {
		t.Fatalf("container B saw %v, want container A's own %v (NAT in the path?)", got, addrA)
	}
	// The Machine's own .1 stays reachable over the mesh with the bridge
	// holding the same address.
	echo(t, l.nsB, netip.AddrPortFrom(netip.MustParseAddr("10.210.1.1"), echoPort))
}
