package acmetest

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ployz/ployz/internal/prereq"
)

// StartBINDWith serves a static zone beside the updatable one: the
// wildcard record answers every name one label under it, and the
// updatable zone still answers its SOA.
func TestStartBINDWithStaticZone(t *testing.T) {
	if testing.Short() {
		prereq.Skip(t, "-short: runs BIND")
	}
	b := StartBINDWith(t, "w.example.test", BINDOptions{Static: map[string][]string{"od.example.test": {"* IN A 192.0.2.7"}}})
	for name, want := range map[string]string{"shop.od.example.test.": "192.0.2.7", "x.od.example.test.": "192.0.2.7"} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, b.Addr)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("%s A: %v %v", name, r, err)
		}
		if a, ok := r.Answer[0].(*dns.A); !ok || a.A.String() != want {
			t.Errorf("%s A: %v, want %s", name, r.Answer[0], want)
		}
	}
	if txt := b.TXT(t, "_acme-challenge.w.example.test"); len(txt) != 0 {
		t.Errorf("TXT %q in a fresh zone", txt)
	}
}
