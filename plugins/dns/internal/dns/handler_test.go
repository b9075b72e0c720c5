package dns

import (
	"fmt"
	"net"
	"slices"
	"testing"

	miekg "github.com/miekg/dns"
)

func TestAnswersNothingBeforeFirstLoad(t *testing.T) {
	h := NewHandler(testCfg(t), nil)
	addr := serve(t, h)
	for _, name := range []string{"api.demo-prod.internal", "nope.internal", "example.com"} {
		if r, err := query(t, addr, name, miekg.TypeA); err == nil {
			t.Fatalf("%s answered before the first load: %v", name, r)
		}
	}
	h.SetTable(NewTable(testMachines, demoRows()))
	r, err := query(t, addr, "api.demo-prod.internal", miekg.TypeA)
	if err != nil || len(r.Answer) != 3 {
		t.Fatalf("after load: %v %v", r, err)
	}
}

func TestInternalAnswers(t *testing.T) {
	h := NewHandler(testCfg(t), nil)
	h.SetTable(NewTable(testMachines, demoRows()))
	addr := serve(t, h)

	r, err := query(t, addr, "api.demo-prod.internal", miekg.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != miekg.RcodeSuccess || !r.Authoritative || len(r.Answer) != 3 {
		t.Fatalf("A: %v", r)
	}
	for _, rr := range r.Answer {
		if rr.Header().Ttl != 0 {
			t.Fatalf("TTL %d, want 0", rr.Header().Ttl)
		}
	}
	// Answer order rotates per query.
	firsts := map[string]bool{}
	for range 6 {
		r, _ := query(t, addr, "api.demo-prod.internal", miekg.TypeA)
		firsts[answerIPs(r)[0]] = true
	}
	if len(firsts) < 2 {
		t.Fatalf("answers never rotate: %v", firsts)
	}
	// Non-A for an existing internal name: empty NOERROR.
	for _, qt := range []uint16{miekg.TypeAAAA, miekg.TypeMX, miekg.TypeTXT, miekg.TypeSRV} {
		r, err := query(t, addr, "api.demo-prod.internal", qt)
		if err != nil || r.Rcode != miekg.RcodeSuccess || len(r.Answer) != 0 {
			t.Fatalf("%s: %v %v", miekg.TypeToString[qt], r, err)
		}
	}
	// Unknown internal names: NXDOMAIN, whatever the type.
	for _, name := range []string{"nope.demo-prod.internal", "api.demo-prod.eu.region.internal", "x.y.z.w.v.internal", "internal"} {
		for _, qt := range []uint16{miekg.TypeA, miekg.TypeAAAA} {
			r, err := query(t, addr, name, qt)
			if err != nil || r.Rcode != miekg.RcodeNameError {
				t.Fatalf("%s %s: %v %v", name, miekg.TypeToString[qt], r, err)
			}
		}
	}
	// Over TCP too.
	m := new(miekg.Msg)
	m.SetQuestion("svc-api.id.lookup.internal.", miekg.TypeA)
	r, _, err = (&miekg.Client{Net: "tcp"}).Exchange(m, addr)
	if err != nil || len(r.Answer) != 3 {
		t.Fatalf("tcp: %v %v", r, err)
	}
}

// upstream is a real resolver on loopback: it answers example.com with
// 192.0.2.1 and big.example.com with many records (truncated over UDP).
func upstream(t *testing.T) (addr string, tcpQueries *int) {
	n := 0
	h := miekg.HandlerFunc(func(w miekg.ResponseWriter, req *miekg.Msg) {
		m := new(miekg.Msg)
		m.SetReply(req)
		_, tcp := w.RemoteAddr().(*net.TCPAddr)
		if tcp {
			n++
		}
		switch req.Question[0].Name {
		case "example.com.":
			m.Answer = append(m.Answer, &miekg.A{Hdr: miekg.RR_Header{Name: "example.com.", Rrtype: miekg.TypeA, Class: miekg.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)})
		case "big.example.com.":
			for i := range 100 {
				m.Answer = append(m.Answer, &miekg.TXT{Hdr: miekg.RR_Header{Name: "big.example.com.", Rrtype: miekg.TypeTXT, Class: miekg.ClassINET, Ttl: 60},
					Txt: []string{fmt.Sprintf("record %03d padded to make the answer longer than one UDP datagram", i)}})
			}
			if !tcp {
				m.Truncate(512)
			}
		default:
			m.Rcode = miekg.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	return serve(t, h), &n
}

func TestForwardsToUpstream(t *testing.T) {
	up, tcpQueries := upstream(t)
	// A dead upstream first: the next one answers.
	h := NewHandler(testCfg(t, "127.0.0.1:1", up), nil)
	h.SetTable(NewTable(testMachines, nil))
	addr := serve(t, h)

	r, err := query(t, addr, "example.com", miekg.TypeA)
	if err != nil || !slices.Equal(answerIPs(r), []string{"192.0.2.1"}) {
		t.Fatalf("forward: %v %v", r, err)
	}
	r, err = query(t, addr, "missing.example.com", miekg.TypeA)
	if err != nil || r.Rcode != miekg.RcodeNameError {
		t.Fatalf("forwarded NXDOMAIN: %v %v", r, err)
	}
	// Truncated over UDP: the handler retries the upstream over TCP and the
	// client, asking over TCP, gets the whole answer.
	m := new(miekg.Msg)
	m.SetQuestion("big.example.com.", miekg.TypeTXT)
	r, _, err = (&miekg.Client{Net: "tcp"}).Exchange(m, addr)
	if err != nil || len(r.Answer) != 100 {
		t.Fatalf("tcp forward: %d answers, %v", len(r.Answer), err)
	}
	before := *tcpQueries
	m.SetEdns0(65000, false)
	r, _, err = (&miekg.Client{Net: "udp", UDPSize: 65000}).Exchange(m, addr)
	if err != nil || len(r.Answer) != 100 || *tcpQueries != before+1 {
		t.Fatalf("udp with truncation fallback: %d answers, tcp queries %d→%d, %v", len(r.Answer), before, *tcpQueries, err)
	}
}

func TestForwardWithoutUpstreamsIsServfail(t *testing.T) {
	h := NewHandler(testCfg(t), nil)
	h.SetTable(NewTable(testMachines, nil))
	r, err := query(t, serve(t, h), "example.com", miekg.TypeA)
	if err != nil || r.Rcode != miekg.RcodeServerFailure {
		t.Fatalf("%v %v", r, err)
	}
}
