package dns

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	miekg "github.com/miekg/dns"
)

// LoopResult summarises a query loop.
type LoopResult struct {
	Queries int `json:"queries"`
	// Failed counts queries that got no good answer within their tries.
	Failed  int `json:"failed"`
	Retried int `json:"retried"` // queries that needed more than one attempt
	// Late counts tries whose answer arrived after their timeout; Lost
	// counts tries never answered, even after the loop waited LateWait at
	// its end. A restart that parks the socket delays queries but loses
	// none, so Failed > 0 with Lost == 0 means "too slow", not "dropped".
	Late     int           `json:"late"`
	Lost     int           `json:"lost"`
	MaxLate  time.Duration `json:"max_late_ns"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	LastFail string        `json:"last_fail,omitempty"`
}

// LateWait is how long a loop listens for late answers after its last query.
const LateWait = 3 * time.Second

// QueryLoop sends count A queries for name to server, one after another,
// the way a stub resolver would: each query gets attempts tries of timeout
// each. A query fails when no try gets NOERROR with at least one A record.
// All tries go out on one UDP socket, so an answer that arrives after its
// try timed out is still seen and counted as late rather than lost.
func QueryLoop(ctx context.Context, server, name string, count, attempts int, timeout, interval time.Duration) LoopResult {
	var res LoopResult
	conn, err := net.Dial("udp", server)
	if err != nil {
		res.LastFail = err.Error()
		return res
	}
	defer conn.Close()
	l := &udpLoop{conn: conn, res: &res, waiting: map[uint16]time.Time{}, buf: make([]byte, 65535)}
	lat := make([]time.Duration, 0, count)
	start := time.Now()
	for i := 0; i < count && ctx.Err() == nil; i++ {
		t0 := time.Now()
		ok := false
		for a := 0; a < attempts && !ok && ctx.Err() == nil; a++ {
			if a == 1 {
				res.Retried++
			}
			ok = l.try(name, timeout)
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
	l.drain(time.Now().Add(LateWait))
	res.Lost = len(l.waiting)
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50, res.P99, res.Max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	return res
}

// udpLoop is one socket's tries and the timed-out ones still waiting.
type udpLoop struct {
	conn    net.Conn
	res     *LoopResult
	waiting map[uint16]time.Time // timed-out try id → when it was sent
	buf     []byte
}

// try sends one query and reads until its answer or its timeout; answers
// to earlier, timed-out tries that arrive meanwhile are counted late.
func (l *udpLoop) try(name string, timeout time.Duration) bool {
	m := new(miekg.Msg)
	m.SetQuestion(miekg.Fqdn(name), miekg.TypeA)
	m.Id = l.freeID()
	sent := time.Now()
	b, err := m.Pack()
	if err == nil {
		_, err = l.conn.Write(b)
	}
	if err != nil {
		l.res.LastFail = err.Error()
		return false
	}
	for {
		r, err := l.read(sent.Add(timeout))
		if err != nil {
			l.waiting[m.Id] = sent
			l.res.LastFail = fmt.Sprintf("no answer within %s: %v", timeout, err)
			return false
		}
		if r.Id != m.Id {
			continue
		}
		if r.Rcode != miekg.RcodeSuccess || len(r.Answer) == 0 {
			l.res.LastFail = fmt.Sprintf("rcode %s, %d answers", miekg.RcodeToString[r.Rcode], len(r.Answer))
			return false
		}
		return true
	}
}

// read returns the next answer before deadline, counting late ones.
func (l *udpLoop) read(deadline time.Time) (*miekg.Msg, error) {
	_ = l.conn.SetReadDeadline(deadline)
	n, err := l.conn.Read(l.buf)
	if err != nil {
		return nil, err
	}
	r := new(miekg.Msg)
	if err := r.Unpack(l.buf[:n]); err != nil {
		return &miekg.Msg{}, nil // not an answer to anything: keep reading
	}
	if sent, ok := l.waiting[r.Id]; ok {
		delete(l.waiting, r.Id)
		l.res.Late++
		l.res.MaxLate = max(l.res.MaxLate, time.Since(sent))
	}
	return r, nil
}

// drain listens for late answers until deadline or until none wait.
func (l *udpLoop) drain(deadline time.Time) {
	for len(l.waiting) > 0 {
		if _, err := l.read(deadline); err != nil {
			return
		}
	}
}

// freeID is a random id no waiting try holds, so a late answer is never
// mistaken for the current one.
func (l *udpLoop) freeID() uint16 {
	for {
		id := miekg.Id()
		if _, busy := l.waiting[id]; !busy && id != 0 {
			return id
		}
	}
}
