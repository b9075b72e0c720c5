package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
)

// TestAckWaitsForRequestsInFlight: a POST the proxy sent to a Container
// before the Serving Pointer left it out holds the ack back (the Deploy
// stops that Container once every Machine acked) until it is answered,
// while new requests go to the new Container. A request that does not
// end holds the ack for ackDrain only.
func TestAckWaitsForRequestsInFlight(t *testing.T) {
	defer func(d time.Duration) { ackDrain = d }(ackDrain)
	ackDrain = 2 * time.Second
	started, release := make(chan struct{}, 10), make(chan struct{})
	oldUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		fmt.Fprint(w, "old")
	}))
	defer oldUp.Close()
	var endAll sync.Once
	defer endAll.Do(func() { close(release) }) // before Close, which waits for handlers
	newUp := namedBackend(t, "new")
	listen := freePort(t)
	src, pointTo := oldAndNew(oldUp.URL, newUp.URL)
	pointTo("p1", "c-old")
	loads := serveSpec(t, listen, src)
	waitAcked(t, src, "p1", 10*time.Second)

	// In flight to c-old when the pointer moves: the ack waits for it.
	answered := make(chan string, 2)
	go func() { answered <- postHost(listen, "web.example.test") }()
	<-started
	pointTo("p2", "c-new")
	waitLoad(t, loads, func(st ingress.Status) bool { return st.Pointers["demo/web"] == "p2" }) // the table routes to c-new
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if got := postHost(listen, "web.example.test"); got != "200 new" {
			t.Fatalf("a request after the move: %s, want 200 new", got)
		}
		if a, _ := src.lastAck(); a.Pointers["demo/web"] == "p2" {
			t.Fatal("p2 acked while a request to the Container it left out was in flight")
		}
		time.Sleep(20 * time.Millisecond)
	}
	release <- struct{}{}
	if got := <-answered; got != "200 old" {
		t.Errorf("the request in flight: %s, want 200 old", got)
	}
	if took := waitAcked(t, src, "p2", time.Second); took > 500*time.Millisecond {
		t.Errorf("p2 acked %s after the last request to c-old ended", took)
	}

	// One that never ends (until the test's end) holds it for ackDrain.
	pointTo("p3", "c-old")
	waitAcked(t, src, "p3", 10*time.Second)
	go func() { answered <- postHost(listen, "web.example.test") }()
	<-started
	pointTo("p4", "c-new")
	took := waitAcked(t, src, "p4", 2*ackDrain)
	if took < ackDrain/2 {
		t.Errorf("p4 acked after %s with a request in flight, want about ackDrain (%s)", took, ackDrain)
	}
	endAll.Do(func() { close(release) })
	<-answered
}

// waitAcked waits until src's last ack names pointer id for demo/web and
// returns how long that took.
func waitAcked(t *testing.T, src *fakeSource, id string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if a, _ := src.lastAck(); a.Pointers["demo/web"] == id {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("pointer %s not acked within %s", id, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// postHost POSTs to listen with Host host and returns "STATUS BODY".
func postHost(listen, host string) string {
	req, _ := http.NewRequest("POST", "http://"+listen+"/", strings.NewReader("one shot"))
	req.Host = host
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// TestDrainsKeepOnlyChangedRoutes: a swap that takes no upstream away
// leaves nothing to wait for, and drained tables are dropped as new
// ones come, so rounds that change nothing hold no old tables.
func TestDrainsKeepOnlyChangedRoutes(t *testing.T) {
	routes := func(ups ...string) *routeTable {
		return buildTable([]ingress.Route{{Hostname: "a.test", Owner: "p/web", State: "published", Upstreams: ups}}, caddyconfig.TLS{})
	}
	log := hclog.NewNullLogger()
	now := time.Now()
	if d := newDrain(routes("10.0.0.1:80"), routes("10.0.0.1:80", "10.0.0.2:80"), now); d != nil {
		t.Errorf("an upstream added: drain of %d routes, want none", len(d.routes))
	}
	old := routes("10.0.0.1:80")
	d := newDrain(old, routes("10.0.0.2:80"), now)
	if d == nil || len(d.routes) != 1 {
		t.Fatalf("an upstream taken away: %+v, want its route", d)
	}
	var ds drains
	old.http["a.test"].routes[0].inflight.Add(1)
	ds.add(d, log)
	for range 100 {
		ds.add(newDrain(routes("10.0.0.2:80"), routes("10.0.0.2:80"), now), log)
	}
	if len(ds.list) != 1 || !ds.pending(now, log) {
		t.Fatalf("%d drains kept, want the one with a request in flight", len(ds.list))
	}
	old.http["a.test"].routes[0].inflight.Add(-1)
	ds.add(nil, log)
	if len(ds.list) != 0 {
		t.Errorf("%d drains kept after the last request ended", len(ds.list))
	}

	// A request on a table is still counted after swaps that keep its
	// upstreams (an added one, a refresh), so the swap that later takes
	// one away waits for it; the table after that counts afresh.
	first := routes("10.0.0.1:80")
	first.http["a.test"].routes[0].inflight.Add(1)
	same, grown, moved := routes("10.0.0.1:80"), routes("10.0.0.1:80", "10.0.0.2:80"), routes("10.0.0.2:80")
	same.inherit(first)
	grown.inherit(same)
	moved.inherit(grown)
	if d := newDrain(grown, moved, now); d == nil || d.inFlight() != 1 {
		t.Errorf("the move after two swaps that kept the upstream: %+v, want the request opened before them", d)
	}
	if n := moved.http["a.test"].routes[0].inflight.Load(); n != 0 {
		t.Errorf("the table after the move counts %d requests, want 0", n)
	}
}
