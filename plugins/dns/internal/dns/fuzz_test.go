package dns

import (
	"net/netip"
	"testing"

	miekg "github.com/miekg/dns"
)

func FuzzQuery(f *testing.F) {
	for _, name := range []string{"api.demo-prod.internal.", "api.demo-prod.nearest.internal.", "api.demo-prod.m2.machine.internal.",
		"svc-api.id.lookup.internal.", "internal.", "x.internal.", "example.com."} {
		for _, qt := range []uint16{miekg.TypeA, miekg.TypeAAAA, miekg.TypeANY, miekg.TypeTXT} {
			m := new(miekg.Msg)
			m.SetQuestion(name, qt)
			b, _ := m.Pack()
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	h := NewHandler(testCfg(f), nil) // no upstreams: external names SERVFAIL without network
	h.SetTable(NewTable(testMachines, demoRows()))
	f.Fuzz(func(t *testing.T, b []byte) {
		req := new(miekg.Msg)
		if req.Unpack(b) != nil {
			return
		}
		for _, tcp := range []bool{false, true} {
			resp := h.Answer(req, tcp)
			if resp == nil {
				continue
			}
			if resp.Id != req.Id {
				t.Fatalf("reply id %d for query %d", resp.Id, req.Id)
			}
			if _, err := resp.Pack(); err != nil {
				t.Fatalf("reply does not pack: %v\n%v", err, resp)
			}
		}
		// Names from the wire also go through ParseName directly.
		for _, q := range req.Question {
			ParseName(q.Name)
		}
	})
}

// FuzzWire: the UDP hot path reads untrusted bytes. It never panics, and
// whatever it answers is the general path's message for the same query.
func FuzzWire(f *testing.F) {
	for _, m := range wireCases() {
		b, _ := m.Pack()
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1})
	h := NewHandler(testCfg(f), nil)
	rows := append(demoRows(), row("me", "m1", "client", "demo-prod", "svc-client", "10.210.1.50", true))
	h.SetTable(NewTable(testMachines, rows))
	src := netip.MustParseAddr("10.210.1.50")
	s := &wireScratch{}
	f.Fuzz(func(t *testing.T, b []byte) {
		s.rot = h.rot.Load()
		got, ok := h.answerWire(b, src, s)
		if !ok {
			return
		}
		req := new(miekg.Msg)
		if err := req.Unpack(b); err != nil {
			t.Fatalf("hot path answered bytes miekg cannot read: %v", err)
		}
		want := h.AnswerFrom(req, src, false)
		g := new(miekg.Msg)
		if err := g.Unpack(got); err != nil || want == nil || g.String() != want.String() {
			t.Fatalf("hot path\n%v (%v)\ngeneral path\n%v", g, err, want)
		}
	})
}
