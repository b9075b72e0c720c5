package proxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

// BenchmarkIngressRules compares, in one Caddy and one run, a plain
// route (one hostname, no path, no option) with a hostname split into
// 20 path routes, each with request and response header rules, the
// request taking one of the middle paths: req/s and p99 of each and the
// ratios rules ÷ plain (issue 46's goal: req/s-ratio at least 0.95). It
// never gates CI.
//
//	go test -run XXX -bench IngressRules -benchtime 3x ./plugins/ingress-caddy/internal/proxy/
func BenchmarkIngressRules(b *testing.B) {
	quietCaddy(b)
	up := httptest.NewServer(benchHandler())
	defer up.Close()
	listen := freePort(b)
	upstream := []string{up.Listener.Addr().String()}
	routes := []ingress.Route{{Hostname: benchHost, Owner: "bench/web", State: "published", Upstreams: upstream}}
	const rulesHost = "rules.bench.test"
	for i := range 20 {
		rt := ingress.Route{Hostname: rulesHost, Path: fmt.Sprintf("/api/v%d", i), Owner: fmt.Sprintf("bench/api%d", i),
			State: "published", Upstreams: upstream}
		rt.StripPrefix = true
		rt.Headers = &routeopt.Headers{
			Request:  &routeopt.HeaderRules{Set: map[string]string{"X-Env": "prod", "X-Route": rt.Path}, Remove: []string{"X-Debug"}},
			Response: &routeopt.HeaderRules{Set: map[string]string{"X-Frame-Options": "DENY"}, Remove: []string{"Server"}},
		}
		routes = append(routes, rt)
	}
	cfg, err := caddyconfig.CaddyConfig(listen, "m1", b.TempDir(), routes)
	if err != nil {
		b.Fatal(err)
	}
	publish(buildTable(routes, caddyconfig.TLS{}))
	defer publish(nil)
	if err := caddy.Load(cfg, false); err != nil {
		b.Fatal(err)
	}
	defer caddy.Stop()
	plain := benchRequest("http", listen)
	rules := benchRequest("http", listen)
	rules.URL.Path = "/api/v10/users/42"
	rules.Host = rulesHost
	runPairRequests(b, "HTTP", "plain", plain, "rules", rules, nil)
}

// BenchmarkIngressWebSocket compares WebSocket echo messages/s (and p99
// of a message's round trip) through the Ingress Proxy with the same
// clients sent directly to the upstream, same run, in rounds of four
// windows (direct, through, through, direct): wsClients connections,
// each sending a 64-byte text message and waiting for its echo. Ratios
// are through ÷ direct. It never gates CI.
//
//	go test -run XXX -bench IngressWebSocket -benchtime 3x ./plugins/ingress-caddy/internal/proxy/
func BenchmarkIngressWebSocket(b *testing.B) {
	quietCaddy(b)
	ws, plain := wsEcho(nil), benchHandler()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			plain.ServeHTTP(w, r) // serveBenchProxy's readiness GET
			return
		}
		ws(w, r)
	}))
	defer up.Close()
	direct := up.Listener.Addr().String()
	through, stop := serveBenchProxy(b, direct, nil)
	defer stop()
	const wsClients = 16
	open := func(addr string) []*wsConn {
		conns := make([]*wsConn, wsClients)
		for i := range conns {
			c, err := wsDial(addr, benchHost, "/")
			if err != nil {
				b.Fatal(err)
			}
			conns[i] = c
		}
		return conns
	}
	dConns, tConns := open(direct), open(through)
	defer func() {
		for _, c := range append(dConns, tConns...) {
			c.c.Close()
		}
	}()
	msg := string(benchBody[:64])
	for _, conns := range [][]*wsConn{dConns, tConns} { // warm up
		if _, err := wsWindow(conns, msg, benchWarmup); err != nil {
			b.Fatal(err)
		}
	}
	var dLat, tLat []time.Duration
	var dTime, tTime time.Duration
	b.ResetTimer()
	for range b.N {
		for _, thru := range []bool{false, true, true, false} {
			conns, lat, elapsed := dConns, &dLat, &dTime
			if thru {
				conns, lat, elapsed = tConns, &tLat, &tTime
			}
			t0 := time.Now()
			l, err := wsWindow(conns, msg, benchWindow)
			*elapsed += time.Since(t0)
			if err != nil {
				b.Fatalf("through=%v: %v", thru, err)
			}
			*lat = append(*lat, l...)
		}
	}
	b.StopTimer()
	dRate, tRate := float64(len(dLat))/dTime.Seconds(), float64(len(tLat))/tTime.Seconds()
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(dRate, "direct-msg/s")
	b.ReportMetric(tRate, "through-msg/s")
	b.ReportMetric(tRate/dRate, "msg/s-ratio")
	b.ReportMetric(us(p99(dLat)), "direct-p99-µs")
	b.ReportMetric(us(p99(tLat)), "through-p99-µs")
	b.ReportMetric(us(p99(tLat))/us(p99(dLat)), "p99-ratio")
	b.Logf("WebSocket echo: %d connections: through %.0f msg/s vs direct %.0f msg/s (%.2f); p99 %.0f µs vs %.0f µs",
		wsClients, tRate, dRate, tRate/dRate, us(p99(tLat)), us(p99(dLat)))
}

// wsWindow has every connection echo msg, one after another, for d, and
// returns every round trip's latency.
func wsWindow(conns []*wsConn, msg string, d time.Duration) ([]time.Duration, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		all      []time.Duration
		firstErr error
	)
	end := time.Now().Add(d)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := c.echo(msg); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, firstErr
}
