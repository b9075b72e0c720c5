package dns

import (
	"context"
	"net"
	"testing"
	"time"

	miekg "github.com/miekg/dns"
)

// TestQueryLoopTellsLateFromLost answers the first query after its
// timeout, never answers the second, and answers the rest at once.
func TestQueryLoopTellsLateFromLost(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 512)
		for n := 0; ; n++ {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(miekg.Msg)
			if q.Unpack(buf[:k]) != nil {
				continue
			}
			r := new(miekg.Msg)
			r.SetReply(q)
			r.Answer = append(r.Answer, &miekg.A{Hdr: miekg.RR_Header{Name: q.Question[0].Name, Rrtype: miekg.TypeA, Class: miekg.ClassINET, Ttl: 1}, A: net.IPv4(10, 0, 0, 1)})
			b, _ := r.Pack()
			switch n {
			case 0:
				time.AfterFunc(300*time.Millisecond, func() { pc.WriteTo(b, from) })
			case 1: // lost
			default:
				pc.WriteTo(b, from)
			}
		}
	}()
	res := QueryLoop(context.Background(), pc.LocalAddr().String(), "api.internal", 5, 1, 100*time.Millisecond, 0)
	if res.Queries != 5 || res.Failed != 2 || res.Late != 1 || res.Lost != 1 || res.Retried != 0 {
		t.Fatalf("got %+v, want 5 queries, 2 failed, 1 late, 1 lost, none retried", res)
	}
	if res.MaxLate < 250*time.Millisecond {
		t.Errorf("max late %s, want about 300ms", res.MaxLate)
	}
}
