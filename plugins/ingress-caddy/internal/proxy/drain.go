package proxy

import (
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Acks wait for the requests in flight. A Serving Pointer ack tells the
// Deploy it may stop the Containers the pointer left out. A request this
// proxy had already sent to one of them, or had looked its route up in
// the previous table and not sent yet, would fail if its Container
// stopped under it (a POST cannot be retried elsewhere). So after a
// table swap the ack waits until no request that entered an older table
// is still on a route whose upstreams changed, for at most ackDrain (the
// drain window). A WebSocket, event stream or gRPC call still open to a
// left-out upstream then is ended cleanly by the proxy (streams.go)
// before the ack; a long poll ends with its Container as it would behind
// any proxy.
const drainPoll = 5 * time.Millisecond

// ackDrain bounds an ack's wait (a variable for tests).
var ackDrain = 10 * time.Second

// enterTable is the table in force, counted as entered: a table swapped
// out between the load and the count is let go and the new one entered,
// so a drain that saw no one entering a retired table never misses a
// request that takes its route from it.
func enterTable() *routeTable {
	for {
		t := table.Load()
		if t == nil {
			return nil
		}
		t.entering.Add(1)
		if table.Load() == t {
			return t
		}
		t.entering.Add(-1)
	}
}

// drain is a retired table whose changed routes may still carry
// requests.
type drain struct {
	t      *routeTable
	routes []*httpRoute // routes with an upstream the next table lacks
	kept   map[string]bool
	until  time.Time
}

// newDrain is the drain of prev once next replaced it; nil when there
// was no table before or no route of it lost an upstream (a request on
// it still goes where the new pointers allow).
func newDrain(prev, next *routeTable, now time.Time) *drain {
	if prev == nil {
		return nil
	}
	kept := next.addrs()
	d := &drain{t: prev, kept: kept, until: now.Add(ackDrain)}
	for _, h := range prev.http {
		for _, r := range h.routes {
			if slices.ContainsFunc(r.dials, func(a string) bool { return !kept[a] }) {
				d.routes = append(d.routes, r)
			}
		}
	}
	if len(d.routes) == 0 {
		return nil
	}
	return d
}

// inFlight counts the requests still entering the table or on its
// changed routes.
func (d *drain) inFlight() int64 {
	n := d.t.entering.Load()
	for _, r := range d.routes {
		n += r.inflight.Load()
	}
	return n
}

// retire ends the long-lived streams (streams.go) still open on d's
// changed routes (or on the routes before them they inherited from) to an upstream the next table lacks; it reports how many.
func (d *drain) retire() int {
	return retireStreams(func(s *stream) bool {
		up := s.upstream.Load()
		return up != nil && !d.kept[*up] && slices.ContainsFunc(d.routes, func(r *httpRoute) bool { return r.inflight == s.route.inflight })
	})
}

// drains are the retired tables the next ack waits for.
type drains struct{ list []*drain }

// add adds d, first dropping the drained ones (a round that loads no
// config acks nothing and would otherwise never prune).
func (ds *drains) add(d *drain, log hclog.Logger) {
	ds.pending(time.Now(), log)
	if d != nil {
		ds.list = append(ds.list, d)
	}
}

// pending drops the drained tables (and those past ackDrain, saying so)
// and reports whether any still carries requests.
func (ds *drains) pending(now time.Time, log hclog.Logger) bool {
	ds.list = slices.DeleteFunc(ds.list, func(d *drain) bool {
		n := d.inFlight()
		if n > 0 && now.After(d.until) {
			ended := d.retire()
			log.Info("acking the Serving Pointers with requests still in flight to upstreams they left out", "requests", n,
				"streams_ended", ended, "waited", ackDrain)
			return true
		}
		return n == 0
	})
	return len(ds.list) > 0
}
