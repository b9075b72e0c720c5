package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// writeSpec writes a minimal HTTP-only spec and returns its path.
func writeSpec(t *testing.T, listen string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "ingress.json")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(`{"machine":"m1","listen":%q,"store_api":"127.0.0.1:1","status_file":%q,"state_dir":%q}`,
		listen, filepath.Join(dir, "status.json"), filepath.Join(dir, "state"))), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// serveSpec runs Serve on an HTTP-only spec listening on listen until
// the test ends, and returns its loads (see startServe).
func serveSpec(t *testing.T, listen string, src Source) chan ingress.Status {
	loads, done, cancel := startServe(writeSpec(t, listen), src)
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return loads
}

func namedBackend(t *testing.T, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, name)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestRoutingChangesKeepClientConnections: a keep-alive client sending
// POSTs without pause (net/http never retries them) through the proxy
// while the route's upstreams move back and forth, a second hostname
// comes and goes and the first goes pending and back: no request fails,
// the client keeps its one connection, Caddy is never reloaded, and
// every answer comes from an upstream the table routed to at the time.
func TestRoutingChangesKeepClientConnections(t *testing.T) {
	a, b := namedBackend(t, "a"), namedBackend(t, "b")
	listen := freePort(t)
	src := &fakeSource{}
	rowsA := []store.Row[store.ContainerBody]{webRow("c1", "m1", a.URL, true, "web.example.test")}
	src.set(rowsA, nil)
	loads := serveSpec(t, listen, src)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 })
	before := caddyLoads.Load()

	var conns atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if !i.Reused {
			conns.Add(1)
		}
	}}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	stop := make(chan struct{})
	var (
		wg             sync.WaitGroup
		n, fails, pend int
		firstErr       error
		seenA, seenB   int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest("POST", "http://"+listen+"/", bytes.NewReader([]byte("x")))
			req.Host = "web.example.test"
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
			resp, err := client.Do(req)
			n++
			if err != nil {
				fails++
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == 502 && strings.Contains(string(body), "no ready Container"):
				pend++
			case resp.StatusCode != 200:
				fails++
				if firstErr == nil {
					firstErr = fmt.Errorf("%d %q", resp.StatusCode, body)
				}
			case string(body) == "a":
				seenA++
			case string(body) == "b":
				seenB++
			}
		}
	}()
	other := webRow("o1", "m1", b.URL, true, "other.example.test")
	steps := [][]store.Row[store.ContainerBody]{
		{webRow("c2", "m1", b.URL, true, "web.example.test")},
		{webRow("c1", "m1", a.URL, true, "web.example.test"), other},
		{webRow("c1", "m1", a.URL, false, "web.example.test"), other},
		{webRow("c2", "m1", b.URL, true, "web.example.test")},
		rowsA,
	}
	for i := 0; i < 3; i++ {
		for _, rows := range steps {
			src.set(rows, nil)
			time.Sleep(150 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d POSTs: %d failed, %d answered 502 while pending, %d from a, %d from b, %d connections", n, fails, pend, seenA, seenB, conns.Load())
	if fails > 0 {
		t.Fatalf("%d of %d POSTs failed; first: %v", fails, n, firstErr)
	}
	if seenA == 0 || seenB == 0 || pend == 0 || n < 100 {
		t.Fatalf("the routing changes were not followed: %d requests, a %d, b %d, pending %d", n, seenA, seenB, pend)
	}
	if c := conns.Load(); c != 1 {
		t.Fatalf("the client opened %d connections, want its one kept", c)
	}
	if got := caddyLoads.Load() - before; got != 0 {
		t.Fatalf("routing changes reloaded Caddy %d times", got)
	}
}

// TestFailoverInsideTheProxy: the first upstream (this Machine's) refuses
// connections: GETs and POSTs are served by the other one at once, and
// the refusing one is ejected (tried last) so later requests go straight
// to the live one. An upstream that accepts and dies before answering
// costs a GET nothing (retried elsewhere) while a POST, which may have
// been processed, fails. When the ejected address comes back in the
// table after a withdrawal, it is tried first again.
func TestFailoverInsideTheProxy(t *testing.T) {
	live := namedBackend(t, "live")
	dead := "http://" + freePort(t) // nothing listens: refused
	var hits atomic.Int64
	dying, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dying.Close()
	go func() {
		for {
			c, err := dying.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			go func() { // read the request, then die without a response
				bufio.NewReader(c).ReadString('\n')
				c.Close()
			}()
		}
	}()
	listen := freePort(t)
	src := &fakeSource{}
	// Local (m1) first: the dead upstream leads.
	src.set([]store.Row[store.ContainerBody]{
		webRow("c1", "m1", dead, true, "web.example.test"),
		webRow("c2", "m2", live.URL, true, "web.example.test"),
	}, nil)
	loads := serveSpec(t, listen, src)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 && len(st.Routes[0].Upstreams) == 2 })
	deadAddr := strings.TrimPrefix(dead, "http://")

	do := func(method string) (int, string, error) {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader("x")
		}
		req, _ := http.NewRequest(method, "http://"+listen+"/", body)
		req.Host = "web.example.test"
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	for _, m := range []string{"POST", "GET", "POST", "HEAD"} {
		if code, body, err := do(m); err != nil || code != 200 || (m != "HEAD" && body != "live") {
			t.Fatalf("%s past a refusing upstream: %d %q %v", m, code, body, err)
		}
	}
	if !isEjected(deadAddr, time.Now()) {
		t.Fatal("the refusing upstream is not ejected")
	}
	u := upstreams{dials: []string{deadAddr, "x"}}
	for range 2 { // whichever turn it is
		if got := u.order(time.Now()); got[0] != "x" || got[1] != deadAddr {
			t.Fatalf("ejected upstream not last: %v", got)
		}
	}
	// Withdrawn, then ready again: tried first at once.
	src.set([]store.Row[store.ContainerBody]{webRow("c2", "m2", live.URL, true, "web.example.test")}, nil)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 && len(st.Routes[0].Upstreams) == 1 })
	src.set([]store.Row[store.ContainerBody]{
		webRow("c1", "m1", dead, true, "web.example.test"),
		webRow("c2", "m2", live.URL, true, "web.example.test"),
	}, nil)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 && len(st.Routes[0].Upstreams) == 2 })
	if isEjected(deadAddr, time.Now()) {
		t.Fatal("an upstream ready again is still ejected")
	}

	// An upstream that dies mid-request.
	src.set([]store.Row[store.ContainerBody]{
		webRow("c1", "m1", "http://"+dying.Addr().String(), true, "web.example.test"),
		webRow("c2", "m2", live.URL, true, "web.example.test"),
	}, nil)
	waitLoad(t, loads, func(st ingress.Status) bool {
		return len(st.Routes) == 1 && len(st.Routes[0].Upstreams) == 2 && st.Routes[0].Upstreams[0] == dying.Addr().String()
	})
	if code, body, err := do("GET"); err != nil || code != 200 || body != "live" {
		t.Fatalf("GET past an upstream dying mid-request: %d %q %v", code, body, err)
	}
	if hits.Load() != 1 {
		t.Fatalf("the dying upstream saw %d requests, want 1", hits.Load())
	}
	unEject(dying.Addr().String())
	if code, _, err := do("POST"); err == nil && code == 200 {
		t.Fatalf("a POST the dying upstream received was retried elsewhere (%d)", code)
	}
}

// TestTCPDrainOnRetire: a TCP connection to an upstream the table stops
// routing to keeps working for the drain window, then is closed; new
// connections go to the new upstream at once; no reload happens.
func TestTCPDrainOnRetire(t *testing.T) {
	drainFor = 500 * time.Millisecond
	defer func() { drainFor = L4Drain }()
	oldUp, newUp := echoServer(t, "old"), echoServer(t, "new")
	_, pp, _ := net.SplitHostPort(freePort(t))
	port, _ := strconv.Atoi(pp)
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{tcpRow("c1", "m1", "db", true, port, oldUp)}, nil)
	loads := serveSpec(t, freePort(t), src)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 && len(st.Routes[0].Upstreams) == 1 })
	before := caddyLoads.Load()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+pp, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := exchange(c, r, "hi"); err != nil || got != "old: hi" {
		t.Fatalf("%q %v", got, err)
	}
	// The drain starts when the proxy swaps its table, after this set and
	// before waitLoad sees the swap (it polls, late on a loaded host): a
	// clock started here never reads less than the drain window.
	retired := time.Now()
	src.set([]store.Row[store.ContainerBody]{tcpRow("c1", "m1", "db", false, port, oldUp), tcpRow("c2", "m1", "db", true, port, newUp)}, nil)
	waitLoad(t, loads, func(st ingress.Status) bool {
		return len(st.Routes) == 1 && len(st.Routes[0].Upstreams) == 1 && st.Routes[0].Upstreams[0] == "127.0.0.1:"+strconv.Itoa(newUp)
	})
	if got, err := exchange(c, r, "still"); err != nil || got != "old: still" {
		t.Fatalf("within the drain window: %q %v", got, err)
	}
	c2, err := net.DialTimeout("tcp", "127.0.0.1:"+pp, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := exchange(c2, bufio.NewReader(c2), "new?"); err != nil || got != "new: new?" {
		t.Fatalf("new connection: %q %v", got, err)
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("the retired connection answered after its drain")
	}
	if d := time.Since(retired); d < drainFor || d > drainFor+2*time.Second {
		t.Fatalf("closed after %v, want about %v", d, drainFor)
	}
	if got := caddyLoads.Load() - before; got != 0 {
		t.Fatalf("an upstream change reloaded Caddy %d times", got)
	}
}

// TestReloadUnderKeepAliveClients: the config does change when a TCP
// port starts or stops listening (or certificates change), and Caddy then
// replaces its servers, which closes idle keep-alive connections. Four
// keep-alive clients send POSTs without pause (never retried by net/http)
// across six reloads, with the HTTP socket parked in an fd store as under
// systemd: none fails, because each reload is preceded by the lame duck
// (clients told to reconnect, new connections queued for the new
// servers). Without the lame duck 4-7 fail here.
func TestReloadUnderKeepAliveClients(t *testing.T) {
	fakeFDStore(t)
	a := namedBackend(t, "a")
	echo := echoServer(t, "db")
	_, pp, _ := net.SplitHostPort(freePort(t))
	port, _ := strconv.Atoi(pp)
	listen := freePort(t)
	src := &fakeSource{}
	web := webRow("c1", "m1", a.URL, true, "web.example.test")
	src.set([]store.Row[store.ContainerBody]{web}, nil)
	loads := serveSpec(t, listen, src)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 })
	before := caddyLoads.Load()

	loop := startPostLoop(listen, 4)
	for i := 0; i < 3; i++ {
		time.Sleep(300 * time.Millisecond)
		src.set([]store.Row[store.ContainerBody]{web, tcpRow("d1", "m1", "db", true, port, echo)}, nil)
		waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 2 })
		time.Sleep(300 * time.Millisecond)
		src.set([]store.Row[store.ContainerBody]{web}, nil)
		waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 })
	}
	time.Sleep(300 * time.Millisecond)
	r := loop.end()
	reloads := caddyLoads.Load() - before
	t.Logf("%d reloads under 4 keep-alive POST loops: %d requests, %d failed (%d on a new connection), %d connections opened", reloads, r.n, r.lost+r.fresh, r.fresh, r.conns)
	if reloads < 6 {
		t.Fatalf("only %d reloads", reloads)
	}
	if r.lost+r.fresh > 0 {
		t.Fatalf("%d of %d POSTs failed across %d reloads; first: %v", r.lost+r.fresh, r.n, reloads, r.firstErr)
	}
}

// TestStopAnswersEveryKeepAliveRequest: the proxy stops (SIGTERM, a
// restart) under four keep-alive clients sending POSTs without pause. No
// request sent on a reused keep-alive connection goes unanswered: the
// lame duck answers each with "Connection: close" and accepts nothing
// new. (Here nothing takes the socket over, so a new connection waiting
// in its queue is reset when it closes, and later ones are refused: those
// are counted apart; under systemd the socket stays in the fd store and
// the next process accepts them, which the lab's restart loops test.)
func TestStopAnswersEveryKeepAliveRequest(t *testing.T) {
	a := namedBackend(t, "a")
	listen := freePort(t)
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{webRow("c1", "m1", a.URL, true, "web.example.test")}, nil)
	loads, done, cancel := startServe(writeSpec(t, listen), src)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 })

	loop := startPostLoop(listen, 4)
	time.Sleep(500 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	r := loop.end()
	t.Logf("stop under 4 keep-alive POST loops: %d requests, %d unanswered on a reused connection, %d answered with Connection: close, %d failed on a new connection after the lame duck", r.n, r.lost, r.shut, r.fresh)
	if r.lost > 0 {
		t.Fatalf("%d POSTs sent on a reused connection went unanswered; first: %v", r.lost, r.firstErr)
	}
	if r.shut == 0 {
		t.Fatal("no answer said Connection: close during the lame duck")
	}
}

// fakeFDStore stands in for systemd's notify socket and fd store: the
// proxy parks its HTTP socket here and listens on it by descriptor (as
// under systemd), and the store keeps the descriptors it was sent.
func fakeFDStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", path)
	var held []int
	go func() {
		buf, oob := make([]byte, 4096), make([]byte, 1024)
		for {
			_, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, m := range msgs {
					if fds, err := syscall.ParseUnixRights(&m); err == nil {
						held = append(held, fds...)
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		for _, fd := range held {
			syscall.Close(fd)
		}
	})
}

// TestLameDuckGate: during the lame duck, listeners wrapped before it
// accept nothing (connections wait in the socket's queue) while one
// wrapped after it (the new servers) accepts at once; when the gate
// opens again (Caddy refused the new config: the old servers go on), the
// old listener accepts what waited.
func TestLameDuckGate(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	old := connTracker{}.WrapListener(raw)
	accepted := make(chan net.Conn, 1)
	var reopen func()
	paused := make(chan struct{})
	go func() {
		reopen = lameDuckPause()
		close(paused)
	}()
	time.Sleep(50 * time.Millisecond) // the gate is set
	go func() {
		if c, err := old.Accept(); err == nil {
			accepted <- c
		}
	}()
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-accepted:
		t.Fatal("an old listener accepted during the lame duck")
	case <-time.After(300 * time.Millisecond):
	}
	raw2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw2.Close()
	fresh := connTracker{}.WrapListener(raw2)
	go net.Dial("tcp", raw2.Addr().String())
	if c2, err := fresh.Accept(); err != nil {
		t.Fatalf("a listener wrapped after the gate: %v", err)
	} else {
		c2.Close()
	}
	<-paused
	reopen()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(2 * time.Second):
		t.Fatal("the old listener never accepted after the gate opened")
	}
}

// postLoop is workers keep-alive clients sending POSTs (never retried
// by net/http) to listen without pause until end.
type postLoop struct {
	mu   sync.Mutex
	res  postResults
	stop chan struct{}
	wg   sync.WaitGroup
}

type postResults struct {
	n     int // requests
	lost  int // failed on a reused connection
	fresh int // failed on a new connection
	shut  int // answered with Connection: close
	conns int // connections opened
	// firstErr is the first failure on a reused connection (else on a
	// new one).
	firstErr error
}

func startPostLoop(listen string, workers int) *postLoop {
	l := &postLoop{stop: make(chan struct{})}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				l.one(client, listen)
			}
		}()
	}
	return l
}

func (l *postLoop) one(client *http.Client, listen string) {
	var reused bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, _ := http.NewRequest("POST", "http://"+listen+"/", strings.NewReader("x"))
	req.GetBody = nil
	req.Host = "web.example.test"
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := client.Do(req)
	closed := false
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		closed = resp.Close
	}
	l.mu.Lock()
	r := &l.res
	r.n++
	if closed {
		r.shut++
	}
	if !reused && !errors.Is(err, syscall.ECONNREFUSED) {
		r.conns++ // connected (a refused dial opened nothing)
	}
	switch {
	case err == nil:
	case !reused:
		r.fresh++
		if r.firstErr == nil {
			r.firstErr = err
		}
	default:
		if r.lost == 0 {
			r.firstErr = err
		}
		r.lost++
	}
	l.mu.Unlock()
	if err != nil && !reused {
		time.Sleep(10 * time.Millisecond) // nothing listens any more
	}
}

func (l *postLoop) end() postResults {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.res
}
