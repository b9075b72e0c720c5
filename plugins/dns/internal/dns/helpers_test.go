package dns

import (
	"net"
	"net/netip"
	"testing"
	"time"

	miekg "github.com/miekg/dns"
	dnsspec "github.com/ployz/ployz/sdk/dns"
	"github.com/ployz/ployz/sdk/serving"

	"github.com/ployz/ployz/sdk/store"
)

// testCfg is a spec on loopback whose "subnet" is 127.0.0.0/8.
func testCfg(t testing.TB, upstreams ...string) dnsspec.Config {
	t.Helper()
	c := dnsspec.Config{}
	c.Machine = "m1"
	c.ListenAddr = mustAP("127.0.0.1:53")
	c.SubnetPrefix = mustPrefix("10.210.1.0/24")
	for _, u := range upstreams {
		c.UpstreamAddrs = append(c.UpstreamAddrs, mustAP(u))
	}
	return c
}

func row(key, owner, svc, ns, sid, ip string, ready bool) store.Row[store.ContainerBody] {
	return store.Row[store.ContainerBody]{Key: key, Owner: owner, Body: store.ContainerBody{
		Service: svc, Namespace: ns, ServiceID: sid, IP: ip, Ready: ready, State: "running"}}
}

// testMachines are m1..m3 participating with the subnets the tests' rows
// use: Machine mN holds 10.210.N.0/24.
var testMachines = serving.Machines{Subnets: map[string]netip.Prefix{
	"m1": netip.MustParsePrefix("10.210.1.0/24"), "m2": netip.MustParsePrefix("10.210.2.0/24"), "m3": netip.MustParsePrefix("10.210.3.0/24")}}

// demoRows: api in demo-prod on m1 (1 ready), m2 (1 ready, 1 not), m3 (1
// ready, 1 without an IP).
func demoRows() []store.Row[store.ContainerBody] {
	return []store.Row[store.ContainerBody]{
		row("c1", "m1", "api", "demo-prod", "svc-api", "10.210.1.2", true),
		row("c2", "m2", "api", "demo-prod", "svc-api", "10.210.2.2", true),
		row("c3", "m2", "api", "demo-prod", "svc-api", "10.210.2.3", false),
		row("c4", "m3", "api", "demo-prod", "svc-api", "10.210.3.2", true),
		row("c5", "m3", "api", "demo-prod", "svc-api", "", true),
		row("c6", "m3", "db", "demo-prod", "svc-db", "10.210.3.9", true),
	}
}

// serve starts h on a loopback UDP and TCP port and returns the address.
func serve(t testing.TB, h miekg.Handler) string {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	for try := 0; ln == nil; try++ { // the same port for UDP and TCP
		var err error
		if pc, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp4", pc.LocalAddr().String()); err != nil {
			pc.Close()
			if try > 20 {
				t.Fatal(err)
			}
		}
	}
	if dh, ok := h.(*Handler); ok { // the production servers: hot path on UDP
		qs := newQueryServers(&Sockets{UDP: pc, TCP: ln}, dh)
		qs.start()
		for _, up := range qs.up {
			<-up
		}
		t.Cleanup(qs.stop)
		return pc.LocalAddr().String()
	}
	u := &miekg.Server{PacketConn: pc, Handler: h}
	tc := &miekg.Server{Listener: ln, Handler: h}
	started := make(chan struct{}, 2)
	u.NotifyStartedFunc = func() { started <- struct{}{} }
	tc.NotifyStartedFunc = func() { started <- struct{}{} }
	go u.ActivateAndServe()
	go tc.ActivateAndServe()
	<-started
	<-started
	t.Cleanup(func() { u.Shutdown(); tc.Shutdown() })
	return pc.LocalAddr().String()
}

func query(t testing.TB, addr, name string, qtype uint16) (*miekg.Msg, error) {
	t.Helper()
	m := new(miekg.Msg)
	m.SetQuestion(miekg.Fqdn(name), qtype)
	r, _, err := (&miekg.Client{Timeout: 500 * time.Millisecond}).Exchange(m, addr)
	return r, err
}

func answerIPs(r *miekg.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*miekg.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

func mustAP(s string) (ap netip.AddrPort) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		a := netip.MustParseAddr(s)
		return netip.AddrPortFrom(a, 53)
	}
	return ap
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
