package proxy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/caddyserver/caddy/v2"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/storetest"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// Load shape: benchClients concurrent keep-alive clients (one connection
// each, HTTP/1.1), every latency recorded. One benchmark iteration is a
// round of four benchWindow windows in the order direct, through, through,
// direct, so drift during a round (CPU frequency, other load) falls on
// both modes alike.
const (
	benchClients = 16
	benchWindow  = 500 * time.Millisecond
	benchWarmup  = 150 * time.Millisecond
	benchHost    = "web.bench.test"
)

// benchBody is the upstream's small fixed response.
var benchBody = bytes.Repeat([]byte("ployz-ingress-bench\n"), 13) // 260 bytes

// BenchmarkIngress compares requests/s and p99 latency through the
// Ingress Proxy (the embedded Caddy) with the same load sent directly to
// the upstream, on the same machine, load generator and run, for HTTP
// and HTTPS (TLS terminated by the proxy; direct is a TLS upstream with
// the same certificate). Ratios are through ÷ direct: req/s-ratio below
// 1 and p99-ratio above 1 are the proxy's cost. It never gates CI.
//
//	go test -run XXX -bench Ingress -benchtime 1x ./plugins/ingress-caddy/internal/proxy/
func BenchmarkIngress(b *testing.B) {
	b.Run("HTTP", benchIngressHTTP)
	b.Run("HTTPS", benchIngressHTTPS)
}

// BenchmarkIngressVsStockCaddy compares the ingress's config (every
// request through the routing-table handler and the dynamic upstream
// source) with stock Caddy proxying the same hostname to the same
// upstream from a static config (a host matcher and reverse_proxy), both
// servers in one Caddy at once, same clients, same run. Ratios are
// ployz ÷ stock. It never gates CI.
//
//	go test -run XXX -bench IngressVsStock -benchtime 3x ./plugins/ingress-caddy/internal/proxy/
func BenchmarkIngressVsStockCaddy(b *testing.B) {
	quietCaddy(b)
	up := httptest.NewServer(benchHandler())
	defer up.Close()
	ours, stock := freePort(b), freePort(b)
	routes := []ingress.Route{{Hostname: benchHost, Owner: "bench/web", State: "published", Upstreams: []string{up.Listener.Addr().String()}}}
	base, err := caddyconfig.CaddyConfig(ours, "m1", b.TempDir(), routes)
	if err != nil {
		b.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(base, &cfg); err != nil {
		b.Fatal(err)
	}
	servers := cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)
	servers["stock"] = map[string]any{
		"listen":          []string{stock},
		"automatic_https": map[string]any{"disable": true},
		"routes": []any{map[string]any{
			"match": []any{map[string]any{"host": []string{benchHost}}},
			"handle": []any{map[string]any{"handler": "reverse_proxy",
				"upstreams":      []any{map[string]any{"dial": up.Listener.Addr().String()}},
				"load_balancing": map[string]any{"selection_policy": map[string]any{"policy": "first"}}}},
			"terminal": true,
		}},
	}
	both, _ := json.Marshal(cfg)
	publish(buildTable(routes, caddyconfig.TLS{}))
	defer publish(nil)
	if err := caddy.Load(both, false); err != nil {
		b.Fatal(err)
	}
	defer caddy.Stop()
	runPairBench(b, "HTTP", "http", "stock", stock, "ployz", ours, nil)
}

func benchIngressHTTP(b *testing.B) {
	quietCaddy(b)
	up := httptest.NewServer(benchHandler())
	defer up.Close()
	through, stop := serveBenchProxy(b, up.Listener.Addr().String(), nil)
	defer stop()
	runIngressBench(b, "HTTP", "http", up.Listener.Addr().String(), through, nil)
}

func benchIngressHTTPS(b *testing.B) {
	quietCaddy(b)
	certPEM, keyPEM, pool := selfSigned(b, benchHost)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	// The proxy terminates TLS and dials the Container over plain HTTP,
	// as in production; direct is the same handler behind TLS with the
	// same certificate, so the client does the same TLS work in both.
	plain := httptest.NewServer(benchHandler())
	defer plain.Close()
	tlsUp := httptest.NewUnstartedServer(benchHandler())
	tlsUp.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	tlsUp.StartTLS()
	defer tlsUp.Close()
	tc := &tls.Config{RootCAs: pool, ServerName: benchHost, NextProtos: []string{"http/1.1"}}
	through, stop := serveBenchProxy(b, plain.Listener.Addr().String(), &benchTLS{certPEM, keyPEM, tc})
	defer stop()
	runIngressBench(b, "HTTPS", "https", tlsUp.Listener.Addr().String(), through, tc)
}

// quietCaddy sends what Caddy logs (to os.Stderr, opened at each load)
// to a file for the benchmark's duration, so its warnings do not split
// the result lines of `go test -bench`; a failed benchmark logs the file.
func quietCaddy(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "caddy.log"))
	if err != nil {
		b.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = f
	b.Cleanup(func() {
		os.Stderr = stderr
		f.Close()
		if b.Failed() {
			out, _ := os.ReadFile(f.Name())
			b.Logf("caddy log:\n%s", out)
		}
	})
}

func benchHandler() http.Handler {
	n := strconv.Itoa(len(benchBody))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", n)
		w.Write(benchBody)
	})
}

// benchSource is a fixed in-memory store: one Input, acks dropped.
type benchSource struct{ in ingress.Input }

func (s benchSource) Input(context.Context) (ingress.Input, error) { return s.in, nil }

func (benchSource) Ack(context.Context, string, store.ServingAckBody) error { return nil }

// benchTLS turns HTTPS on in serveBenchProxy: the certificate for
// benchHost and the client config that trusts it.
type benchTLS struct {
	certPEM, keyPEM []byte
	client          *tls.Config
}

// serveBenchProxy runs the real proxy (Serve) on free loopback ports, fed
// in-memory Container rows whose one ready Container serves benchHost at
// upstream, and returns the address the load goes to once it proxies
// there: the HTTP listen, or with t the HTTPS listen_tls.
//
// With t the spec turns HTTPS on (an acme field) and the certificate is a
// certificates row of a real in-process store node at the spec's
// store_api, which is where Serve's certificate manager reads it. The
// certificate is valid for a year, so the manager never contacts the
// (unreachable) ACME directory: Serve loads it with
// caddyconfig.CaddyConfigTLS as in production.
func serveBenchProxy(b testing.TB, upstream string, t *benchTLS) (addr string, stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := b.TempDir()
	listen := freePort(b)
	spec := map[string]any{"machine": "m1", "listen": listen, "store_api": "127.0.0.1:1",
		"status_file": filepath.Join(dir, "status.json"), "state_dir": filepath.Join(dir, "state")}
	addr, scheme := listen, "http"
	var tc *tls.Config
	if t != nil {
		n := storetest.Start(b, storetest.NoAuth())
		blk, _ := pem.Decode(t.certPEM)
		leaf, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		if _, err := store.New(n.API()).Certificates().Put(ctx, store.Row[store.CertificateBody]{Key: benchHost, Owner: "m1",
			Body: store.CertificateBody{Domains: []string{benchHost}, CertPEM: string(t.certPEM), KeyPEM: string(t.keyPEM),
				NotBefore: leaf.NotBefore.Unix(), NotAfter: leaf.NotAfter.Unix(), Issuer: "m1"}}); err != nil {
			cancel()
			b.Fatal(err)
		}
		addr, scheme, tc = freePort(b), "https", t.client
		spec["store_api"], spec["listen_tls"] = n.API(), addr
		spec["acme"] = map[string]any{"directory": "https://acme.invalid/directory"}
	}
	specPath := filepath.Join(dir, "ingress.json")
	raw, _ := json.Marshal(spec)
	if err := os.WriteFile(specPath, raw, 0o644); err != nil {
		cancel()
		b.Fatal(err)
	}
	ip, port, _ := net.SplitHostPort(upstream)
	p, _ := strconv.Atoi(port)
	src := benchSource{ingress.Input{Machines: testMachines, Containers: []store.Row[store.ContainerBody]{{Key: "c1", Owner: "m1", Body: store.ContainerBody{
		Namespace: "bench", Service: "web", IP: ip, Ready: true,
		Ingress: []store.IngressRoute{{Hostname: benchHost, ContainerPort: p}}}}}}}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, Options{SpecPath: specPath, Source: src}) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Serve: %v", err)
		}
	}
	c := benchClient(tc)
	defer c.CloseIdleConnections()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = benchGet(c, benchRequest(scheme, addr)); err == nil {
			return addr, stop
		}
		select {
		case err := <-done:
			done <- err
			stop()
			b.Fatalf("Serve ended before proxying: %v", err)
		default:
		}
	}
	stop()
	status, _ := os.ReadFile(filepath.Join(dir, "status.json"))
	b.Fatalf("the proxy never answered %s://%s: %v; status file:\n%s", scheme, addr, err, status)
	return "", nil
}

func runIngressBench(b *testing.B, mode, scheme, direct, through string, tc *tls.Config) {
	runPairBench(b, mode, scheme, "direct", direct, "through", through, tc)
}

// runPairBench compares base (named baseName) with addr (named name), in
// rounds of four windows (base, addr, addr, base): req/s and p99 of each
// and the ratios addr ÷ base.
func runPairBench(b *testing.B, mode, scheme, baseName, direct, name, through string, tc *tls.Config) {
	runPairRequests(b, mode, baseName, benchRequest(scheme, direct), name, benchRequest(scheme, through), tc)
}

// runPairRequests is runPairBench with the two requests given.
func runPairRequests(b *testing.B, mode, baseName string, dReq *http.Request, name string, tReq *http.Request, tc *tls.Config) {
	clients := make([]*http.Client, benchClients)
	for i := range clients {
		clients[i] = benchClient(tc)
		defer clients[i].CloseIdleConnections()
	}
	// Warm up: open every connection (and its TLS session) and the
	// proxy's upstream pool before timing.
	if _, err := loadWindow(clients, dReq, benchWarmup); err != nil {
		b.Fatalf("direct warm-up: %v", err)
	}
	if _, err := loadWindow(clients, tReq, benchWarmup); err != nil {
		b.Fatalf("through warm-up: %v", err)
	}
	var dLat, tLat []time.Duration
	var dTime, tTime time.Duration
	dials := benchDials.Load()
	b.ResetTimer()
	for range b.N {
		for _, through := range []bool{false, true, true, false} {
			req, lat, elapsed := dReq, &dLat, &dTime
			if through {
				req, lat, elapsed = tReq, &tLat, &tTime
			}
			t0 := time.Now()
			l, err := loadWindow(clients, req, benchWindow)
			*elapsed += time.Since(t0)
			if err != nil {
				b.Fatalf("%s (through=%v): %v", mode, through, err)
			}
			*lat = append(*lat, l...)
		}
	}
	b.StopTimer()
	// Keep-alive holds: only the rare race of Go's Transport (the next
	// request dials before the previous connection is back in the idle
	// pool) opens a connection while timed.
	dials = benchDials.Load() - dials
	dRPS, tRPS := float64(len(dLat))/dTime.Seconds(), float64(len(tLat))/tTime.Seconds()
	dP99, tP99 := p99(dLat), p99(tLat)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(0, "ns/op") // an iteration is a fixed-length round
	b.ReportMetric(dRPS, baseName+"-req/s")
	b.ReportMetric(tRPS, name+"-req/s")
	b.ReportMetric(tRPS/dRPS, "req/s-ratio")
	b.ReportMetric(us(dP99), baseName+"-p99-µs")
	b.ReportMetric(us(tP99), name+"-p99-µs")
	b.ReportMetric(us(tP99)/us(dP99), "p99-ratio")
	b.Logf("%s: %d clients: %s %.0f req/s vs %s %.0f req/s (%.2f); p99 %s %.0f µs vs %s %.0f µs (%.2fx); %d+%d requests, %d new connections",
		mode, benchClients, name, tRPS, baseName, dRPS, tRPS/dRPS, name, us(tP99), baseName, us(dP99), us(tP99)/us(dP99), len(tLat), len(dLat), dials)
}

// loadWindow runs every client in its own goroutine, one request after
// another, for d, and returns every request's latency.
func loadWindow(clients []*http.Client, req *http.Request, d time.Duration) ([]time.Duration, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		all      []time.Duration
		firstErr error
	)
	end := time.Now().Add(d)
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req.Clone(context.Background())
			lat := make([]time.Duration, 0, 4096)
			var err error
			for time.Now().Before(end) {
				t0 := time.Now()
				if err = benchGet(c, r); err != nil {
					break
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, firstErr
}

func benchGet(c *http.Client, r *http.Request) error {
	resp, err := c.Do(r)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || n != int64(len(benchBody)) {
		return fmt.Errorf("%s: status %d, %d bytes, want 200 and %d bytes", r.URL, resp.StatusCode, n, len(benchBody))
	}
	return nil
}

// benchDials counts the connections benchClient's clients open.
var benchDials atomic.Int64

// benchClient is one keep-alive connection's client: HTTP/1.1, no
// compression, no proxy from the environment.
func benchClient(tc *tls.Config) *http.Client {
	d := &net.Dialer{}
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true, Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			benchDials.Add(1)
			return d.DialContext(ctx, network, addr)
		}}
	if tc != nil {
		tr.TLSClientConfig = tc.Clone()
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func benchRequest(scheme, addr string) *http.Request {
	r, err := http.NewRequest("GET", scheme+"://"+addr+"/", nil)
	if err != nil {
		panic(err)
	}
	r.Host = benchHost
	return r
}

func p99(lat []time.Duration) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}

// selfSigned makes a self-signed ECDSA P-256 certificate for host and a
// pool that trusts it.
func selfSigned(b *testing.B, host string) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	b.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		b.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	return certPEM, keyPEM, certPool(b, certPEM)
}

func certPool(b testing.TB, certPEM []byte) *x509.CertPool {
	b.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certPEM) {
		b.Fatal(errors.New("bad certificate PEM"))
	}
	return pool
}
