package dns

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	miekg "github.com/miekg/dns"

	"github.com/ployz/ployz/sdk/store"
)

// benchRows is 200 Services of 3 Containers each on 3 Machines.
func benchRows() []store.Row[store.ContainerBody] {
	var rows []store.Row[store.ContainerBody]
	for s := range 200 {
		for m := range 3 {
			rows = append(rows, row(fmt.Sprintf("c%d-%d", s, m), fmt.Sprintf("m%d", m+1), fmt.Sprintf("svc%d", s), "demo-prod",
				fmt.Sprintf("id%d", s), fmt.Sprintf("10.210.%d.%d", m+1, s+2), true))
		}
	}
	return rows
}

// BenchmarkQueryUDP measures queries/s and p99 latency of one client
// sending queries one after another over UDP on loopback to a server on
// the same host; run with -cpu 1 for the one-core figure.
func BenchmarkQueryUDP(b *testing.B) {
	h := NewHandler(testCfg(b), nil)
	h.SetTable(NewTable(testMachines, benchRows()))
	addr := serve(b, h)
	c := &miekg.Client{Timeout: time.Second}
	co, err := c.Dial(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer co.Close()
	m := new(miekg.Msg)
	m.SetQuestion("svc42.demo-prod.internal.", miekg.TypeA)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		m.Id = uint16(i)
		t0 := time.Now()
		r, _, err := c.ExchangeWithConn(m, co)
		if err != nil || len(r.Answer) != 3 {
			b.Fatalf("query %d: %v %v", i, r, err)
		}
		lat = append(lat, time.Since(t0))
	}
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	qps := float64(b.N) / el.Seconds()
	p99 := lat[len(lat)*99/100]
	b.ReportMetric(qps, "queries/s")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	if b.N >= 1000 {
		fmt.Printf("dns bench: %d queries, %.0f queries/s, p50 %s, p99 %s (GOMAXPROCS=%d)\n", b.N, qps, lat[len(lat)/2], p99, gomaxprocs())
	}
}

// BenchmarkAnswer is the handler alone, without sockets.
func BenchmarkAnswer(b *testing.B) {
	h := NewHandler(testCfg(b), nil)
	h.SetTable(NewTable(testMachines, benchRows()))
	m := new(miekg.Msg)
	m.SetQuestion("svc42.demo-prod.nearest.internal.", miekg.TypeA)
	b.ReportAllocs()
	for b.Loop() {
		if r := h.Answer(m, false); len(r.Answer) != 3 {
			b.Fatal(r)
		}
	}
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkAnswerWire is the UDP hot path alone, without sockets.
func BenchmarkAnswerWire(b *testing.B) {
	h := NewHandler(testCfg(b), nil)
	h.SetTable(NewTable(testMachines, benchRows()))
	m := new(miekg.Msg)
	m.SetQuestion("svc42.demo-prod.internal.", miekg.TypeA)
	m.SetEdns0(1232, false)
	q, _ := m.Pack()
	s := &wireScratch{}
	b.ReportAllocs()
	for b.Loop() {
		if r, ok := h.answerWire(q, netip.Addr{}, s); !ok || len(r) != len(q)+48 {
			b.Fatal(len(r), ok)
		}
	}
}
