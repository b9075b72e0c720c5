package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/plugins/ingress-caddy/acmetest"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/acme"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/store"
)

// TestOnDemandTLSWithPebble runs the proxy (Serve, real Caddy) with a
// wildcard route declaring tls on_demand and a real ACME CA (Pebble,
// validating HTTP-01 against the proxy's port 80 for real): the first
// handshake for a name under the wildcard waits for its certificate and
// completes with it; a name outside any on-demand route, or two labels
// under it, fails its handshake and places no order at the CA.
func TestOnDemandTLSWithPebble(t *testing.T) {
	if testing.Short() {
		prereq.Skip(t, "-short: builds and runs Pebble")
	}
	backend := namedBackend(t, "backend")
	httpAddr, tlsAddr := freePort(t), freePort(t)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	port, _ := strconv.Atoi(httpPort)
	pebble := acmetest.Start(t, acmetest.Options{HTTPPort: port})

	dir := t.TempDir()
	specPath := filepath.Join(dir, "ingress.json")
	spec, _ := json.Marshal(ingress.Spec{Machine: "m1", Listen: httpAddr, ListenTLS: tlsAddr, StoreAPI: "127.0.0.1:1",
		StatusFile: filepath.Join(dir, "status.json"), StateDir: filepath.Join(dir, "state"),
		ACME: &ingress.ACMESpec{Directory: pebble.Directory, CAFile: pebble.CAFile}})
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	row := webRow("c1", "m2", backend.URL, true, "*.od.test")
	row.Body.Ingress[0].TLS = routeopt.TLSOnDemand
	plain := webRow("c2", "m2", backend.URL, true, "*.plain.test") // a wildcard without on_demand
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{row, plain}, nil)
	certs := &certStore{certs: map[string]store.Row[store.CertificateBody]{}}

	loads, done := make(chan ingress.Status, 100), make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- Serve(ctx, Options{SpecPath: specPath, Source: src, Interval: 50 * time.Millisecond,
			Log: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testLog{t}}),
			OnLoad: func(st ingress.Status) {
				select {
				case loads <- st:
				default:
				}
			},
			ACME: func(c *acme.Config) {
				c.Store, c.Interval, c.ChallengeGrace = certs, 100*time.Millisecond, 200*time.Millisecond
				c.Verify = func(context.Context, string, []string) error { return nil } // no public DNS here
			}})
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 2 })

	dial := func(sni string) (*tls.Conn, error) {
		d := &net.Dialer{Timeout: 30 * time.Second}
		return tls.DialWithDialer(d, "tcp", tlsAddr, &tls.Config{ServerName: sni, RootCAs: pebble.Roots(t)})
	}
	for _, sni := range []string{"x.other.test", "a.b.od.test", "x.plain.test"} {
		if c, err := dial(sni); err == nil {
			c.Close()
			t.Errorf("handshake %s completed: no on-demand route covers it", sni)
		}
	}
	if n := pebble.Orders(); n != 0 {
		t.Fatalf("%d orders at the CA for names outside the on-demand route; want none", n)
	}

	start := time.Now()
	c, err := dial("shop.od.test")
	if err != nil {
		t.Fatalf("first handshake for shop.od.test (on demand): %v\npebble log:\n%s", err, pebble.Log())
	}
	leaf := c.ConnectionState().PeerCertificates[0]
	c.Close()
	t.Logf("first handshake with on-demand issuance took %s", time.Since(start).Round(time.Millisecond))
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "shop.od.test" {
		t.Errorf("certificate names %v, want [shop.od.test]", leaf.DNSNames)
	}
	if n := pebble.Issued(); n != 1 {
		t.Errorf("%d certificates issued, want 1", n)
	}
	if r, ok := certs.certs["shop.od.test"]; !ok || r.Body.CertPEM == "" {
		t.Errorf("no certificate row for shop.od.test in the store: the Cluster shares it")
	}
	// Again: served from what was issued, no new order.
	if c, err = dial("shop.od.test"); err != nil {
		t.Fatalf("second handshake: %v", err)
	}
	c.Close()
	if n := pebble.Orders(); n != 1 {
		t.Errorf("%d orders after the second handshake, want 1", n)
	}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

func TestBucket(t *testing.T) {
	b, now := newBucket(2, time.Second), time.Unix(1000, 0)
	// Three takes at one instant, in order (each changes the bucket).
	first, second, third := b.take(now), b.take(now), b.take(now)
	if !first || !second || third {
		t.Fatal("burst of 2 not honoured")
	}
	if b.take(now.Add(500*time.Millisecond)) || !b.take(now.Add(1600*time.Millisecond)) {
		t.Fatal("one token per second not honoured")
	}
}
