package dns

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	miekg "github.com/miekg/dns"
)

// TestUDPBatchesAnswerEveryClient: many clients each send a burst of
// queries without waiting, mixed with junk and with queries for the
// general path; every query gets its own answer, at its own client,
// nothing is lost, and junk is never answered.
func TestUDPBatchesAnswerEveryClient(t *testing.T) {
	up, _ := upstream(t)
	h := NewHandler(testCfg(t, up), nil)
	h.SetTable(NewTable(testMachines, benchRows()))
	addr := serve(t, h)
	const clients, per = 8, 300
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("udp4", addr)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer conn.Close()
			// A burst of answers must not overflow the client's own buffer.
			growReadBuffer(conn.(*net.UDPConn))
			want := map[uint16]string{}
			for i := range per {
				m := new(miekg.Msg)
				name := "svc" + itoa3(i%200) + ".demo-prod.internal."
				if i%50 == 7 {
					name = "example.com." // forwarded: the general path
				}
				m.SetQuestion(name, miekg.TypeA)
				m.Id = uint16(c*1000 + i)
				want[m.Id] = name
				b, _ := m.Pack()
				conn.Write(b)
				if i%100 == 3 {
					conn.Write([]byte{1, 2, 3, 4, 5}) // junk, never answered
				}
			}
			buf := make([]byte, 4096)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			for len(want) > 0 {
				n, err := conn.Read(buf)
				if err != nil {
					errs <- fmt.Sprint("client ", c, ": ", len(want), " queries unanswered: ", err, want)
					return
				}
				r := new(miekg.Msg)
				if err := r.Unpack(buf[:n]); err != nil {
					errs <- "unpackable answer: " + err.Error()
					return
				}
				name, ok := want[r.Id]
				if !ok || r.Question[0].Name != name {
					errs <- "an answer for another query or client: " + r.Question[0].Name
					return
				}
				if got := len(r.Answer); (name == "example.com." && got != 1) || (name != "example.com." && got != 3) {
					errs <- name + ": wrong answer " + r.String()
					return
				}
				delete(want, r.Id)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func itoa3(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa3(i/10) + string(rune('0'+i%10))
}

// TestGeneralPathIsBounded: with every general-path slot taken (say, by
// upstreams that do not answer), a forwarded query gets SERVFAIL at once
// instead of another goroutine, while internal names are still answered;
// once a slot frees, forwarding works again.
func TestGeneralPathIsBounded(t *testing.T) {
	up, _ := upstream(t)
	h := NewHandler(testCfg(t, up), nil)
	h.SetTable(NewTable(testMachines, demoRows()))
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, err := newUDPServer(pc, h)
	if err != nil {
		t.Fatal(err)
	}
	u.slots = make(chan struct{}, 1)
	u.slots <- struct{}{} // the one slot is busy
	go u.ActivateAndServe()
	t.Cleanup(func() { u.ShutdownContext(context.Background()); pc.Close() })
	m := new(miekg.Msg)
	m.SetQuestion("example.com.", miekg.TypeA)
	m.SetEdns0(1232, false)
	r, _, err := (&miekg.Client{Timeout: time.Second}).Exchange(m, pc.LocalAddr().String())
	if err != nil || r.Rcode != miekg.RcodeServerFailure || r.IsEdns0() == nil {
		t.Fatalf("forward with no slot: %v %v", r, err)
	}
	if r, err := query(t, pc.LocalAddr().String(), "api.demo-prod.internal", miekg.TypeA); err != nil || len(r.Answer) != 3 {
		t.Fatalf("internal name with no slot: %v %v", r, err)
	}
	<-u.slots
	if r, err := query(t, pc.LocalAddr().String(), "example.com", miekg.TypeA); err != nil || r.Rcode != miekg.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("forward with a free slot: %v %v", r, err)
	}
}
