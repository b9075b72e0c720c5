package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// protoUpstream is a Container speaking, on one port, HTTP/1.1 and
// HTTP/2 without TLS: a WebSocket echo on /ws, server-sent events on
// /events (one "data: NAME N" every 50 ms until the request ends), gRPC
// (the standard health service, its service NAME SERVING) and NAME on
// anything else, with the protocol it was reached over.
type protoUpstream struct {
	url      string
	addr     string
	health   *health.Server
	wsClosed chan int // close codes the WebSocket echo received (-1: none)
}

func startProtoUpstream(t *testing.T, name string) *protoUpstream {
	t.Helper()
	u := &protoUpstream{health: health.NewServer(), wsClosed: make(chan int, 10)}
	u.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, u.health)
	ws := wsEcho(u.wsClosed)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.ProtoMajor == 2 && isGRPC(r.Header.Get("Content-Type")):
			gs.ServeHTTP(w, r)
		case r.URL.Path == "/ws":
			ws(w, r)
		case r.URL.Path == "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; ; i++ {
				fmt.Fprintf(w, "data: %s %d\n\n", name, i)
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		default:
			fmt.Fprintf(w, "%s %s", name, r.Proto)
		}
	})
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		gs.Stop()
		srv.Close()
	})
	u.addr = l.Addr().String()
	u.url = "http://" + u.addr
	return u
}

// grpcConn is a gRPC client of host through the proxy at addr: h2c
// without tc, else TLS.
func grpcConn(t *testing.T, addr, host string, tc *tls.Config) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = grpccreds.NewTLS(tc)
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds), grpc.WithAuthority(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// checkGRPC makes a unary call and a server stream through cc: the
// health of service is SERVING, and a change the upstream makes while
// the stream is open arrives on it.
func checkGRPC(t *testing.T, cc *grpc.ClientConn, up *protoUpstream, service string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(cc)
	res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("unary Check through the ingress: %v %v", res, err)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nobody"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unary Check of an unknown service: %v, want NotFound (the upstream's status through the trailers)", err)
	}
	st, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch, first message: %v %v", m, err)
	}
	up.health.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)
	defer up.health.SetServingStatus(service, healthpb.HealthCheckResponse_SERVING)
	if m, err := st.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch, the change streamed: %v %v", m, err)
	}
}

// TestProtocolsThroughIngress: through the real Caddy with the ployz
// handler on plain HTTP, a WebSocket echoes both ways, server-sent
// events arrive one by one while the response is open, an HTTP/2 client
// without TLS (prior knowledge) is answered over HTTP/2, and gRPC unary
// and server-streaming calls reach an h2c upstream, statuses and all.
func TestProtocolsThroughIngress(t *testing.T) {
	up := startProtoUpstream(t, "web")
	listen := serveOneRoute(t, up.url, "web.example.test")

	ws, err := wsDial(listen, "web.example.test", "/ws")
	if err != nil {
		t.Fatalf("WebSocket through the ingress: %v", err)
	}
	defer ws.c.Close()
	for _, m := range []string{"one", strings.Repeat("x", 70000)} { // a 64-bit length too
		if err := ws.echo(m); err != nil {
			t.Fatal(err)
		}
	}

	events, cancel := openEvents(t, listen, "web.example.test")
	defer cancel()
	for i := range 3 {
		if l, err := nextEvent(events); err != nil || l != fmt.Sprintf("data: web %d", i) {
			t.Fatalf("event %d: %q %v", i, l, err)
		}
	}

	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Protocols: &p}}
	req, _ := http.NewRequest("GET", "http://"+listen+"/", nil)
	req.Host = "web.example.test"
	res, err := h2c.Do(req)
	if err != nil {
		t.Fatalf("h2c client: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 || string(b) != "web HTTP/1.1" {
		t.Fatalf("h2c client: %s %q, want HTTP/2 answered by the upstream over HTTP/1.1", res.Proto, b)
	}

	checkGRPC(t, grpcConn(t, listen, "web.example.test", nil), up, "web")
}

// TestProtocolsOverTLS: over HTTPS the client gets HTTP/2 (ALPN), a
// WebSocket still upgrades over HTTP/1.1, and gRPC calls over TLS reach
// the upstream over h2c.
func TestProtocolsOverTLS(t *testing.T) {
	up := startProtoUpstream(t, "web")
	certPEM, keyPEM, der := testCert("a.test")
	httpAddr, tlsAddr := freePort(t), freePort(t)
	routes := []ingress.Route{{Hostname: "a.test", Owner: "p/web", State: "published", Upstreams: []string{up.addr}}}
	loadTLS(t, httpAddr, routes, caddyconfig.TLS{Listen: tlsAddr, Certificates: []caddyconfig.Certificate{{CertPEM: certPEM, KeyPEM: keyPEM}}})

	hc := httpsClient(der, tlsAddr)
	hc.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	res, err := hc.Get("https://a.test/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 || string(b) != "web HTTP/1.1" {
		t.Fatalf("https: %s %q, want HTTP/2", res.Proto, b)
	}

	pool := x509.NewCertPool()
	pool.AddCert(must(x509.ParseCertificate(der)))
	tc := &tls.Config{RootCAs: pool, ServerName: "a.test"}
	c, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: pool, ServerName: "a.test", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ws, err := wsHandshake(c, "a.test", "/ws")
	if err != nil {
		t.Fatalf("WebSocket over TLS: %v", err)
	}
	if err := ws.echo("over tls"); err != nil {
		t.Fatal(err)
	}

	checkGRPC(t, grpcConn(t, tlsAddr, "a.test", tc), up, "web")
}

// TestUpstreamProtocolH2C: a route declaring upstream_protocol h2c
// sends its plain requests to the upstream over HTTP/2 without TLS.
func TestUpstreamProtocolH2C(t *testing.T) {
	up := startProtoUpstream(t, "web")
	listen := freePort(t)
	src := &fakeSource{}
	row := webRow("c1", "m1", up.url, true, "web.example.test")
	row.Body.Ingress[0].UpstreamProtocol = "h2c"
	src.set([]store.Row[store.ContainerBody]{row}, nil)
	loads := serveSpec(t, listen, src)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 })
	if code, body, err := get(t, listen, "web.example.test", "/"); err != nil || code != 200 || body != "web HTTP/2.0" {
		t.Fatalf("got %d %q %v, want the upstream reached over HTTP/2", code, body, err)
	}
	ws, err := wsDial(listen, "web.example.test", "/ws") // an upgrade stays HTTP/1.1
	if err != nil {
		t.Fatal(err)
	}
	defer ws.c.Close()
	if err := ws.echo("still"); err != nil {
		t.Fatal(err)
	}
}

// openEvents opens an event stream through the proxy at listen.
func openEvents(t *testing.T, listen, host string) (*bufio.Reader, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+listen+"/events", nil)
	req.Host = host
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		cancel()
		t.Fatalf("event stream: %d %s", res.StatusCode, ct)
	}
	return bufio.NewReader(res.Body), func() { cancel(); res.Body.Close() }
}

// nextEvent is the next event's data line.
func nextEvent(r *bufio.Reader) (string, error) {
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return l, err
		}
		if l = strings.TrimSpace(l); l != "" {
			return l, nil
		}
	}
}

// TestStreamsDrainOnPointerMove: a WebSocket, an event stream and a
// gRPC server stream open on the old Container when its Serving Pointer
// moves stay open and flowing for the drain window (while new requests
// go to the new Container), then the proxy ends them cleanly: the
// WebSocket with a close frame 1001 both ways, the event stream as a
// complete response, the gRPC stream with UNAVAILABLE; only then is the
// pointer acked (the Deploy stops the old Container after the ack), also
// when a table swap that changed no upstream came between.
func TestStreamsDrainOnPointerMove(t *testing.T) {
	defer func(d time.Duration) { ackDrain = d }(ackDrain)
	ackDrain = 2 * time.Second
	oldUp, newUp := startProtoUpstream(t, "old"), startProtoUpstream(t, "new")
	listen := freePort(t)
	src, pointTo := oldAndNew(oldUp.url, newUp.url)
	pointTo("p1", "c-old")
	loads := serveSpec(t, listen, src)
	waitAcked(t, src, "p1", 10*time.Second)

	ws, err := wsDial(listen, "web.example.test", "/ws")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.c.Close()
	if err := ws.echo("before"); err != nil {
		t.Fatal(err)
	}
	events, cancel := openEvents(t, listen, "web.example.test")
	defer cancel()
	if l, err := nextEvent(events); err != nil || l != "data: old 0" {
		t.Fatalf("first event: %q %v", l, err)
	}
	ctx, cancelWatch := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelWatch()
	watch, err := healthpb.NewHealthClient(grpcConn(t, listen, "web.example.test", nil)).Watch(ctx, &healthpb.HealthCheckRequest{Service: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v %v", m, err)
	}
	grpcEnd := make(chan error, 1)
	go func() {
		for {
			if _, err := watch.Recv(); err != nil {
				grpcEnd <- err
				return
			}
		}
	}()
	eventsEnd := make(chan error, 1)
	go func() {
		for {
			if _, err := nextEvent(events); err != nil {
				eventsEnd <- err
				return
			}
		}
	}()

	// A round that takes no upstream away (here the pointer naming the
	// same Container again; in a Cluster any refresh) swaps the table:
	// the streams opened before it must still hold the next move's ack.
	pointTo("p1b", "c-old")
	waitLoad(t, loads, func(st ingress.Status) bool { return st.Pointers["demo/web"] == "p1b" })
	waitAcked(t, src, "p1b", 5*time.Second)

	pointTo("p2", "c-new")
	waitLoad(t, loads, func(st ingress.Status) bool { return st.Pointers["demo/web"] == "p2" })
	moved := time.Now()
	if code, body, err := get(t, listen, "web.example.test", "/"); err != nil || code != 200 || body != "new HTTP/1.1" {
		t.Fatalf("a request after the move: %d %q %v", code, body, err)
	}
	// Open and flowing well into the drain window.
	for time.Since(moved) < ackDrain*3/4 {
		if err := ws.echo("during"); err != nil {
			t.Fatalf("the WebSocket %s after the move: %v", time.Since(moved), err)
		}
		if a, _ := src.lastAck(); a.Pointers["demo/web"] == "p2" {
			t.Fatal("p2 acked with streams open on the old Container inside the drain window")
		}
		select {
		case err := <-eventsEnd:
			t.Fatalf("the event stream ended %s after the move: %v", time.Since(moved), err)
		case err := <-grpcEnd:
			t.Fatalf("the gRPC stream ended %s after the move: %v", time.Since(moved), err)
		case <-time.After(100 * time.Millisecond):
		}
	}

	f, err := ws.next(ackDrain + 5*time.Second)
	closedAt := time.Since(moved)
	if err != nil || f.closeCode() != wsGoingAway {
		t.Fatalf("the WebSocket at the drain's end: frame %+v %v, want a close frame %d", f, err, wsGoingAway)
	}
	if closedAt < ackDrain*3/4 {
		t.Fatalf("the WebSocket was closed %s after the move, inside the drain window (%s)", closedAt, ackDrain)
	}
	select {
	case code := <-oldUp.wsClosed:
		if code != wsGoingAway {
			t.Errorf("the old Container's WebSocket ended with %d, want a close frame %d", code, wsGoingAway)
		}
	case <-time.After(5 * time.Second):
		t.Error("the old Container's WebSocket did not end")
	}
	select {
	case err := <-eventsEnd:
		if !errors.Is(err, io.EOF) {
			t.Errorf("the event stream ended with %v, want a complete response (EOF)", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the event stream did not end")
	}
	select {
	case err := <-grpcEnd:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("the gRPC stream ended with %v, want UNAVAILABLE", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the gRPC stream did not end")
	}
	waitAcked(t, src, "p2", 5*time.Second)
}

// TestStopEndsWebSockets: a proxy that stops (a restart, an upgrade)
// with a WebSocket still open closes it with a close frame 1001 before
// it exits, not with the process.
func TestStopEndsWebSockets(t *testing.T) {
	defer func(d time.Duration) { drainTimeout = d }(drainTimeout)
	drainTimeout = streamsGrace + time.Second
	up := startProtoUpstream(t, "web")
	listen := freePort(t)
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{webRow("c1", "m1", up.url, true, "web.example.test")}, nil)
	loads, done, stop := startServe(writeSpec(t, listen), src)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 })
	ws, err := wsDial(listen, "web.example.test", "/ws")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.c.Close()
	if err := ws.echo("hello"); err != nil {
		t.Fatal(err)
	}
	stop()
	if f, err := ws.next(drainTimeout + 5*time.Second); err != nil || f.closeCode() != wsGoingAway {
		t.Fatalf("the WebSocket when the proxy stops: %+v %v, want a close frame %d", f, err, wsGoingAway)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code := <-up.wsClosed; code != wsGoingAway {
		t.Errorf("the upstream's WebSocket ended with %d, want %d", code, wsGoingAway)
	}
}
