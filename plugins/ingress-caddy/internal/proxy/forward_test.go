package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// TestForwardHeaders: the upstream sees the client's Host, X-Forwarded-*
// set by the proxy (a client's own are replaced: no client is trusted),
// no hop-by-hop header, and the client gets the upstream's status,
// headers and body as sent.
func TestForwardHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Up", "1")
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "host=%s xff=%s proto=%s xfh=%s conn=%q te=%q", r.Host, r.Header.Get("X-Forwarded-For"),
			r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"), r.Header.Get("Connection"), r.Header.Get("X-Hop"))
	}))
	defer up.Close()
	listen := serveOneRoute(t, up.URL, "web.example.test")

	req, _ := http.NewRequest("GET", "http://"+listen+"/x", nil)
	req.Host = "web.example.test"
	req.Header.Set("X-Forwarded-For", "6.6.6.6")
	req.Header.Set("X-Forwarded-Host", "evil.test")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "dropped")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	want := `host=web.example.test xff=127.0.0.1 proto=http xfh=web.example.test conn="" te=""`
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Up") != "1" || string(b) != want {
		t.Fatalf("got %d X-Up=%q %q, want 418 X-Up=1 %q", resp.StatusCode, resp.Header.Get("X-Up"), b, want)
	}
}

// TestForwardUpgrade: a connection upgrade (as WebSocket does) passes
// through the proxy and both directions flow until the client closes.
func TestForwardUpgrade(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want Upgrade: echo", http.StatusBadRequest)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		rw.Flush()
		for {
			line, err := rw.ReadString('\n')
			if err != nil {
				return
			}
			rw.WriteString("echo " + line)
			rw.Flush()
		}
	}))
	defer up.Close()
	listen := serveOneRoute(t, up.URL, "ws.example.test")

	req, _ := http.NewRequest("GET", "http://"+listen+"/", nil)
	req.Host = "ws.example.test"
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrade answered %d %q", resp.StatusCode, b)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 body is %T, not a connection", resp.Body)
	}
	r := bufio.NewReader(conn)
	for _, msg := range []string{"one", "two"} {
		if _, err := io.WriteString(conn, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		done := make(chan string, 1)
		go func() { l, _ := r.ReadString('\n'); done <- l }()
		select {
		case got := <-done:
			if strings.TrimSpace(got) != "echo "+msg {
				t.Fatalf("through the upgraded connection: %q, want %q", got, "echo "+msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no echo through the upgraded connection")
		}
	}
}

// serveOneRoute runs the proxy with one ready Container serving host at
// upstream and returns its listen address once the route is loaded.
func serveOneRoute(t *testing.T, upstream, host string) string {
	listen := freePort(t)
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{webRow("c1", "m1", upstream, true, host)}, nil)
	loads := serveSpec(t, listen, src)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 })
	return listen
}

// forwardTo sends one request through the forwarder's policy to dials,
// as the proxy does for a routed request.
func forwardTo(t *testing.T, method string, dials ...string) (*http.Response, error) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("one shot")
	}
	ctx := context.WithValue(context.Background(), routeKey{}, &httpRoute{upstreams: upstreams{dials: dials}})
	req, err := http.NewRequestWithContext(ctx, method, "http://upstream/x", body)
	if err != nil {
		t.Fatal(err)
	}
	return newForwarder().RoundTrip(req)
}

// refusedAddr is a loopback address nobody listens on (for now).
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestForwardDialRounds: while every upstream refuses the dial (a mesh
// that stops forwarding for a moment), a POST waits for one to come
// back rather than answering 502, and its body arrives whole.
func TestForwardDialRounds(t *testing.T) {
	a, b := refusedAddr(t), refusedAddr(t)
	got := make(chan string, 1)
	go func() {
		time.Sleep(400 * time.Millisecond)
		l, err := net.Listen("tcp4", b)
		if err != nil {
			got <- "listen: " + err.Error()
			return
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			got <- string(body)
		})}
		t.Cleanup(func() { srv.Close() })
		srv.Serve(l)
	}()
	start := time.Now()
	res, err := forwardTo(t, http.MethodPost, a, b)
	if err != nil {
		t.Fatalf("after %s: %v, want the upstream that came back to answer", time.Since(start), err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("status %d after %s", res.StatusCode, time.Since(start))
	}
	if body := <-got; body != "one shot" {
		t.Fatalf("the upstream read %q, want the POST's body", body)
	}
}

// TestForwardDialBudget: upstreams that stay unreachable end in an
// error once the budget is spent, not in a request held forever.
func TestForwardDialBudget(t *testing.T) {
	defer func(b time.Duration) { dialBudget = b }(dialBudget)
	dialBudget = 300 * time.Millisecond
	start := time.Now()
	if res, err := forwardTo(t, http.MethodGet, refusedAddr(t), refusedAddr(t)); err == nil {
		res.Body.Close()
		t.Fatalf("unreachable upstreams answered %d", res.StatusCode)
	}
	if took := time.Since(start); took < dialBudget || took > dialBudget+2*time.Second {
		t.Fatalf("gave up after %s, want about the budget (%s)", took, dialBudget)
	}
}

// TestForwardNoReplayOfSentPOST: a POST whose upstream dropped the
// connection after receiving it is not sent to the next upstream (it may
// have been processed); a body-less GET is.
func TestForwardNoReplayOfSentPOST(t *testing.T) {
	var dropped, answered atomic.Int32
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dropped.Add(1)
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer drop.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answered.Add(1) }))
	defer ok.Close()
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

	if res, err := forwardTo(t, http.MethodPost, host(drop), host(ok)); err == nil {
		res.Body.Close()
		t.Fatalf("a POST the first upstream dropped answered %d through the second", res.StatusCode)
	}
	if dropped.Load() != 1 || answered.Load() != 0 {
		t.Fatalf("POST: dropped %d, answered %d; want 1, 0", dropped.Load(), answered.Load())
	}
	unEject(host(drop))
	res, err := forwardTo(t, http.MethodGet, host(drop), host(ok))
	if err != nil {
		t.Fatalf("GET: %v, want the second upstream's answer", err)
	}
	res.Body.Close()
	if dropped.Load() != 2 || answered.Load() != 1 {
		t.Fatalf("GET: dropped %d, answered %d; want 2, 1", dropped.Load(), answered.Load())
	}
}

// TestForwardSpreadsOverLocalReplicas: through the real proxy on m1,
// which runs two replicas of web, requests spread over both instead of
// all going to the first; the status says both are local.
func TestForwardSpreadsOverLocalReplicas(t *testing.T) {
	var hits [2]atomic.Int32
	var ups [2]*httptest.Server
	for i := range ups {
		ups[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits[i].Add(1) }))
		defer ups[i].Close()
	}
	listen := freePort(t)
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{
		webRow("c1", "m1", ups[0].URL, true, "web.example.test"),
		webRow("c2", "m1", ups[1].URL, true, "web.example.test"),
		webRow("c3", "m3", "http://127.0.0.1:1", true, "web.example.test"),
	}, nil)
	loads := serveSpec(t, listen, src)
	waitLoad(t, loads, func(st ingress.Status) bool {
		return len(st.Routes) == 1 && len(st.Routes[0].Upstreams) == 3 && st.Routes[0].Local == 2
	})
	for i := 0; i < 6; i++ {
		if code, _, err := get(t, listen, "web.example.test", "/"); err != nil || code != http.StatusOK {
			t.Fatalf("request %d: %d %v", i, code, err)
		}
	}
	if a, b := hits[0].Load(), hits[1].Load(); a != 3 || b != 3 {
		t.Fatalf("the local replicas got %d and %d requests; want 3 and 3", a, b)
	}
}

// TestForwardNoUpstreamAnsweredSaysSo: a route whose every upstream
// refuses answers 502 with a body naming the host, not an empty 502 that
// looks like the application's own.
func TestForwardNoUpstreamAnsweredSaysSo(t *testing.T) {
	defer func(b time.Duration) { dialBudget = b }(dialBudget)
	dialBudget = 200 * time.Millisecond
	listen := serveOneRoute(t, "http://"+refusedAddr(t), "web.example.test")
	code, body, err := get(t, listen, "web.example.test", "/")
	if err != nil || code != http.StatusBadGateway || body != "ployz: no Container of web.example.test answered\n" {
		t.Fatalf("got %d %q %v", code, body, err)
	}
}
