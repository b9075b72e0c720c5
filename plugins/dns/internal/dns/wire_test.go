package dns

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	miekg "github.com/miekg/dns"
)

// wireCases are queries of every kind the hot path may see.
func wireCases() []*miekg.Msg {
	var out []*miekg.Msg
	names := []string{"api.demo-prod.internal.", "API.Demo-Prod.internal.", "api.demo-prod.nearest.internal.",
		"api.demo-prod.m2.machine.internal.", "api.demo-prod.m9.machine.internal.", "svc-api.id.lookup.internal.",
		"api.internal.", "db.internal.", "nope.demo-prod.internal.", "internal.", "a.b.c.d.e.f.internal.",
		"example.com.", "2.1.210.10.in-addr.arpa.", "big.demo-prod.internal."}
	for i, name := range names {
		for _, qt := range []uint16{miekg.TypeA, miekg.TypeAAAA, miekg.TypeANY, miekg.TypeTXT, miekg.TypePTR} {
			for e, edns := range []int{0, 512, 1232, 4096, 100} {
				m := new(miekg.Msg)
				m.SetQuestion(name, qt)
				m.Id = uint16(i*100 + e)
				m.RecursionDesired = e%2 == 0
				m.CheckingDisabled = e == 2
				if edns > 0 {
					m.SetEdns0(uint16(edns), e == 3)
				}
				out = append(out, m)
			}
		}
	}
	// EDNS0 options: a cookie (dig sends one by default) and padding.
	for i, opt := range []miekg.EDNS0{&miekg.EDNS0_COOKIE{Code: miekg.EDNS0COOKIE, Cookie: "0102030405060708"},
		&miekg.EDNS0_PADDING{Padding: make([]byte, 12)}, &miekg.EDNS0_NSID{Code: miekg.EDNS0NSID},
		&miekg.EDNS0_SUBNET{Code: miekg.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(10, 210, 1, 0)}} {
		m := new(miekg.Msg)
		m.SetQuestion("api.demo-prod.internal.", miekg.TypeA)
		m.Id = uint16(9000 + i)
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, opt)
		out = append(out, m)
	}
	return out
}

// TestWireDeclinesBrokenOptions: an OPT whose options run past its
// rdata (the input fuzzing found) goes to the general path, which
// cannot read it either; the hot path never answers it.
func TestWireDeclinesBrokenOptions(t *testing.T) {
	m := new(miekg.Msg)
	m.SetQuestion("api.demo-prod.internal.", miekg.TypeA)
	m.SetEdns0(1232, false)
	q, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(testCfg(t), nil)
	h.SetTable(NewTable(testMachines, demoRows()))
	for name, rdata := range map[string][]byte{
		"short header":    {0, 10, 0},
		"length overruns": {0, 10, 0, 9, 1, 2, 3},
		"subnet":          {0, 8, 0, 1, 0xff},
		"second overruns": {0, 12, 0, 0, 0, 10, 0, 8, 1},
	} {
		b := append([]byte{}, q...)
		b[len(b)-2], b[len(b)-1] = 0, byte(len(rdata)) // OPT rdlength
		b = append(b, rdata...)
		s := &wireScratch{rot: h.rot.Load()}
		if _, ok := h.answerWire(b, netip.MustParseAddr("10.210.1.50"), s); ok {
			t.Errorf("%s: hot path answered an OPT with rdata %x", name, rdata)
		}
	}
}

// TestWireMatchesGeneralPath: for every query the hot path answers, its
// message is exactly the general path's (header, question, answers in
// order, OPT), with the same rotation;
// every query it declines goes to the general path.
func TestWireMatchesGeneralPath(t *testing.T) {
	rows := demoRows()
	rows = append(rows, row("me", "m1", "client", "demo-prod", "svc-client", "10.210.1.50", true))
	for i := range 60 { // more than fit 512 bytes: truncated over UDP
		rows = append(rows, row(fmt.Sprintf("b%d", i), "m2", "big", "demo-prod", "svc-big", fmt.Sprintf("10.210.2.%d", 100+i), true))
	}
	h := NewHandler(testCfg(t), nil)
	h.SetTable(NewTable(testMachines, rows))
	src := netip.MustParseAddr("10.210.1.50")
	s := &wireScratch{}
	answered := 0
	for _, m := range wireCases() {
		q, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		// Same rotation for both: the general path's counter is the
		// handler's, the hot path's the scratch's.
		s.rot = h.rot.Load()
		got, ok := h.answerWire(q, src, s)
		if !ok {
			switch ParseName(m.Question[0].Name).Kind {
			case NameExternal, NameReverse:
			default:
				if hasOption(m, miekg.EDNS0SUBNET) {
					continue // checked by the general path
				}
				t.Errorf("hot path declined %s %s", m.Question[0].Name, miekg.TypeToString[m.Question[0].Qtype])
			}
			continue
		}
		answered++
		want := h.AnswerFrom(m, src, false)
		// The same message; the hot path compresses the answers' owner
		// name, which miekg does not by default.
		g := new(miekg.Msg)
		gerr := g.Unpack(got)
		if gerr != nil || g.String() != want.String() || g.Truncated != want.Truncated {
			t.Fatalf("%s %s edns=%v: hot path\n%v (%v)\ngeneral path\n%v", m.Question[0].Name, miekg.TypeToString[m.Question[0].Qtype], m.IsEdns0(), g, gerr, want)
		}
	}
	if answered < 300 {
		t.Fatalf("hot path answered only %d queries", answered)
	}
	// Queries it must leave alone.
	m := new(miekg.Msg)
	m.SetQuestion("api.demo-prod.internal.", miekg.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	q, _ := m.Pack()
	if _, ok := h.answerWire(q, src, s); ok {
		t.Error("hot path answered EDNS version 1")
	}
	m = new(miekg.Msg)
	m.SetQuestion("api.demo-prod.internal.", miekg.TypeA)
	q, _ = m.Pack()
	for _, bad := range [][]byte{append(q, 0), q[:len(q)-1], q[:12]} {
		if _, ok := h.answerWire(bad, src, s); ok {
			t.Errorf("hot path answered a malformed query %x", bad)
		}
	}
}

func TestWireAllocatesNothing(t *testing.T) {
	h := NewHandler(testCfg(t), nil)
	h.SetTable(NewTable(testMachines, benchRows()))
	s := &wireScratch{}
	for _, name := range []string{"svc42.demo-prod.internal.", "svc42.demo-prod.nearest.internal.", "nope.demo-prod.internal."} {
		m := new(miekg.Msg)
		m.SetQuestion(name, miekg.TypeA)
		m.SetEdns0(1232, false)
		q, _ := m.Pack()
		if n := testing.AllocsPerRun(200, func() {
			if _, ok := h.answerWire(q, netip.Addr{}, s); !ok {
				t.Fatal("declined")
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per query", name, n)
		}
	}
}

func hasOption(m *miekg.Msg, code uint16) bool {
	if o := m.IsEdns0(); o != nil {
		for _, e := range o.Option {
			if e.Option() == code {
				return true
			}
		}
	}
	return false
}
