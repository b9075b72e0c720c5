package dns

import (
	"context"
	"fmt"
	"slices"
	"time"

	miekg "github.com/miekg/dns"
)

// LoopResult summarises a query loop.
type LoopResult struct {
	Queries  int           `json:"queries"`
	Failed   int           `json:"failed"`
	Retried  int           `json:"retried"` // queries that needed more than one attempt
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	LastFail string        `json:"last_fail,omitempty"`
}

// QueryLoop sends count A queries for name to server, one after another,
// the way a stub resolver would: each query gets attempts tries of timeout
// each. A query fails when no try gets NOERROR with at least one A record.
func QueryLoop(ctx context.Context, server, name string, count, attempts int, timeout, interval time.Duration) LoopResult {
	var res LoopResult
	lat := make([]time.Duration, 0, count)
	start := time.Now()
	c := &miekg.Client{Timeout: timeout}
	m := new(miekg.Msg)
	m.SetQuestion(miekg.Fqdn(name), miekg.TypeA)
	for i := 0; i < count && ctx.Err() == nil; i++ {
		t0 := time.Now()
		ok := false
		for a := 0; a < attempts && !ok; a++ {
			if a == 1 {
				res.Retried++
			}
			m.Id = miekg.Id()
			r, _, err := c.ExchangeContext(ctx, m, server)
			switch {
			case err != nil:
				res.LastFail = err.Error()
			case r.Rcode != miekg.RcodeSuccess || len(r.Answer) == 0:
				res.LastFail = fmt.Sprintf("rcode %s, %d answers", miekg.RcodeToString[r.Rcode], len(r.Answer))
			default:
				ok = true
			}
		}
		res.Queries++
		if !ok {
			res.Failed++
		}
		lat = append(lat, time.Since(t0))
		if interval > 0 {
			time.Sleep(interval)
		}
	}
	res.Elapsed = time.Since(start)
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50, res.P99, res.Max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	return res
}
