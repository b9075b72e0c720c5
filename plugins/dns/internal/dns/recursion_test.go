package dns

import (
	"net"
	"testing"

	miekg "github.com/miekg/dns"
)

// fromWriter records the answer to a query that arrived from addr.
type fromWriter struct {
	miekg.ResponseWriter
	addr net.Addr
	got  *miekg.Msg
}

func (w *fromWriter) RemoteAddr() net.Addr        { return w.addr }
func (w *fromWriter) WriteMsg(m *miekg.Msg) error { w.got = m; return nil }

func TestRecursionOnlyForServedSources(t *testing.T) {
	up, _ := upstream(t)
	cfg := testCfg(t, up)
	cfg.NetworkPrefix = mustPrefix("10.210.0.0/16")
	h := NewHandler(cfg, nil)
	h.SetTable(NewTable(testMachines, demoRows()))
	ask := func(src, name string) *miekg.Msg {
		m := new(miekg.Msg)
		m.SetQuestion(miekg.Fqdn(name), miekg.TypeA)
		w := &fromWriter{addr: &net.UDPAddr{IP: net.ParseIP(src), Port: 5353}}
		h.ServeDNS(w, m)
		return w.got
	}
	for _, src := range []string{"10.210.1.7", "10.210.2.7", "127.0.0.1"} { // bridge, mesh, loopback
		if r := ask(src, "example.com"); r == nil || r.Rcode != miekg.RcodeSuccess || len(r.Answer) != 1 {
			t.Errorf("recursion for %s = %v; want forwarded", src, r)
		}
	}
	for _, src := range []string{"192.0.2.7", "fdcc::7"} {
		r := ask(src, "example.com")
		if r == nil || r.Rcode != miekg.RcodeRefused || len(r.Answer) != 0 {
			t.Errorf("recursion for stranger %s = %v; want REFUSED", src, r)
		}
	}
	// Without the Cluster network in the spec only the bridge may recurse.
	h.SetConfig(testCfg(t, up))
	if r := ask("10.210.2.7", "example.com"); r == nil || r.Rcode != miekg.RcodeRefused {
		t.Errorf("recursion from the mesh without a network = %v; want REFUSED", r)
	}
}
