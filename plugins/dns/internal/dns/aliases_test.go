package dns

import (
	"net/netip"
	"slices"
	"testing"

	miekg "github.com/miekg/dns"

	"github.com/ployz/ployz/sdk/store"
)

// aliasRows: shop's api carries the alias "pay" on the external network
// payments and "backend" on shop's own network; bank's web is on
// payments, bank's db and shop's web are not. bank's worker claims
// "backend" on shop's network too, which it cannot be on, and on its own.
func aliasRows() []store.Row[store.ContainerBody] {
	api := row("a1", "m2", "api", "shop-prod", "sid-api", "10.210.2.5", true)
	api.Body.Networks = []string{"external:payments", "shop-prod"}
	api.Body.Aliases = map[string][]string{"external:payments": {"pay", "web"}, "shop-prod": {"backend"}}
	api2 := row("a2", "m3", "api", "shop-prod", "sid-api", "10.210.3.5", true)
	api2.Body.Networks, api2.Body.Aliases = api.Body.Networks, api.Body.Aliases
	bankWeb := row("b1", "m1", "web", "bank-prod", "sid-bweb", "10.210.1.7", true)
	bankWeb.Body.Networks = []string{"bank-prod", "external:payments"}
	bankDB := row("b2", "m1", "db", "bank-prod", "sid-bdb", "10.210.1.8", true)
	shopWeb := row("s1", "m1", "web", "shop-prod", "sid-sweb", "10.210.1.9", true)
	worker := row("w1", "m3", "worker", "bank-prod", "sid-worker", "10.210.3.66", true)
	worker.Body.Networks = []string{"shop-prod", "bank-prod"}
	worker.Body.Aliases = map[string][]string{"shop-prod": {"backend"}, "bank-prod": {"backend"}}
	return []store.Row[store.ContainerBody]{api, api2, bankWeb, bankDB, shopWeb, worker}
}

// TestAliasAnswersMembersOnly: an alias resolves, as <alias>.internal and
// through the caller's search domain (<alias>.<its namespace>.internal),
// only for a Container on the network carrying it; every other caller
// gets NXDOMAIN, and a Service of the caller's namespace keeps its name.
// The UDP hot path and the general path agree.
func TestAliasAnswersMembersOnly(t *testing.T) {
	h := NewHandler(testCfg(t), nil)
	h.SetTable(NewTable(testMachines, aliasRows()))
	const (
		bankWeb = "10.210.1.7"
		bankDB  = "10.210.1.8"
		shopWeb = "10.210.1.9"
		notCtr  = "10.210.1.1"
	)
	both := []string{"10.210.2.5", "10.210.3.5"}
	cases := []struct {
		from, name string
		want       []string // nil: NXDOMAIN
	}{
		{bankWeb, "pay.bank-prod.internal", both}, // the search domain form
		{bankWeb, "pay.internal", both},
		{bankWeb, "PAY.Bank-Prod.Internal", both},
		{bankDB, "pay.bank-prod.internal", nil},  // same namespace, not on payments
		{bankDB, "pay.internal", nil},            //
		{shopWeb, "pay.shop-prod.internal", nil}, // the alias holder's namespace, not on payments
		{bankWeb, "pay.shop-prod.internal", nil}, // not the caller's own domain
		{notCtr, "pay.bank-prod.internal", nil},  // no Container
		{shopWeb, "backend.shop-prod.internal", both},
		{shopWeb, "backend.internal", both},                              // bank's worker's claim on shop-prod counts for nothing
		{bankWeb, "backend.bank-prod.internal", []string{"10.210.3.66"}}, // its alias on its own network does
		{shopWeb, "web.shop-prod.internal", []string{shopWeb}},
		{bankWeb, "web.bank-prod.internal", []string{bankWeb}}, // bank's own web before api's alias "web"
	}
	s := &wireScratch{}
	for _, c := range cases {
		m := new(miekg.Msg)
		m.SetQuestion(miekg.Fqdn(c.name), miekg.TypeA)
		r := h.AnswerFrom(m, netip.MustParseAddr(c.from), false)
		// The UDP hot path answers the same.
		q, _ := m.Pack()
		if raw, ok := h.answerWire(q, netip.MustParseAddr(c.from), s); !ok {
			t.Errorf("%s from %s: the hot path declined", c.name, c.from)
		} else if w := new(miekg.Msg); w.Unpack(raw) != nil || w.Rcode != r.Rcode || len(w.Answer) != len(r.Answer) {
			t.Errorf("%s from %s: hot path %v, general path %v", c.name, c.from, w, r)
		}
		if c.want == nil {
			if r.Rcode != miekg.RcodeNameError || len(r.Answer) != 0 {
				t.Errorf("%s from %s: rcode %s %v, want NXDOMAIN", c.name, c.from, miekg.RcodeToString[r.Rcode], answerIPs(r))
			}
			continue
		}
		got := answerIPs(r)
		slices.Sort(got)
		if r.Rcode != miekg.RcodeSuccess || !slices.Equal(got, c.want) {
			t.Errorf("%s from %s: rcode %s %v, want %v", c.name, c.from, miekg.RcodeToString[r.Rcode], got, c.want)
		}
	}
}

// BenchmarkAnswerWireAlias is an alias answered on the UDP hot path: the
// Service lookup misses, then the caller's networks are searched.
func BenchmarkAnswerWireAlias(b *testing.B) {
	h := NewHandler(testCfg(b), nil)
	h.SetTable(NewTable(testMachines, aliasRows()))
	m := new(miekg.Msg)
	m.SetQuestion("pay.bank-prod.internal.", miekg.TypeA)
	q, _ := m.Pack()
	src := netip.MustParseAddr("10.210.1.7")
	s := &wireScratch{}
	b.ReportAllocs()
	for b.Loop() {
		if r, ok := h.answerWire(q, src, s); !ok || len(r) != len(q)+2*16 {
			b.Fatal(len(r), ok)
		}
	}
}
