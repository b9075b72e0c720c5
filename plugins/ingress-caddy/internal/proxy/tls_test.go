package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"

	"github.com/ployz/ployz/sdk/ingress"
)

// Caddy loads CaddyConfigTLS as generated: HTTPS by SNI with the loaded
// material (same routes as HTTP), HTTP unchanged, the challenge answered
// on HTTP for its own host, and no handshake for a hostname without
// material; the upstream sees X-Forwarded-Proto https over HTTPS.
func TestCaddyServesLoadedCertificate(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Proto", r.Header.Get("X-Forwarded-Proto"))
		io.WriteString(w, "backend")
	}))
	defer backend.Close()
	certPEM, keyPEM, der := testCert("a.test")
	httpAddr, tlsAddr := freePort(t), freePort(t)
	routes := []ingress.Route{
		{Hostname: "a.test", Owner: "p/web", State: "published", Upstreams: []string{backend.Listener.Addr().String()}},
		{Hostname: "b.test", Owner: "p/web", State: "published", Upstreams: []string{backend.Listener.Addr().String()}},
	}
	in := caddyconfig.TLS{Listen: tlsAddr,
		Certificates: []caddyconfig.Certificate{{CertPEM: certPEM, KeyPEM: keyPEM}},
		Challenges:   []caddyconfig.Challenge{{Hostname: "a.test", Token: "tok_1", KeyAuthorization: "tok_1.thumb"}}}
	loadTLS(t, httpAddr, routes, in)

	hc := httpsClient(der, tlsAddr)
	resp, err := hc.Get("https://a.test/")
	if err != nil {
		t.Fatalf("https a.test: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "backend" || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 42 {
		t.Fatalf("https a.test: %d %q", resp.StatusCode, b)
	}
	if p := resp.Header.Get("X-Seen-Proto"); p != "https" {
		t.Errorf("the upstream saw X-Forwarded-Proto %q over HTTPS, want https", p)
	}
	if _, err := hc.Get("https://b.test/"); err == nil {
		t.Fatal("https b.test (no material) completed a handshake")
	}
	get := func(host, path string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+httpAddr+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("b.test", "/"); code != 200 || body != "backend" {
		t.Fatalf("http b.test: %d %q", code, body)
	}
	if code, body := get("a.test", "/.well-known/acme-challenge/tok_1"); code != 200 || body != "tok_1.thumb" {
		t.Fatalf("challenge: %d %q", code, body)
	}
	if code, body := get("anything.test", "/.well-known/acme-challenge/tok_1"); code != 404 || body == "tok_1.thumb" {
		t.Fatalf("challenge for another host: %d %q", code, body)
	}
	// HTTPS answers no challenge: an unknown host stays unknown there.
	req, _ := http.NewRequest("GET", "https://a.test/.well-known/acme-challenge/tok_1", nil)
	if resp, err := hc.Do(req); err != nil {
		t.Fatal(err)
	} else if b, _ := io.ReadAll(resp.Body); resp.Body.Close() == nil && string(b) == "tok_1.thumb" {
		t.Fatalf("https answered a challenge")
	}
}

// loadTLS publishes the table of routes and in, and loads their
// CaddyConfigTLS (HTTP on httpAddr) into Caddy until the test ends.
func loadTLS(t *testing.T, httpAddr string, routes []ingress.Route, in caddyconfig.TLS) {
	t.Helper()
	publish(buildTable(routes, in))
	t.Cleanup(func() { publish(nil) })
	cfg, err := caddyconfig.CaddyConfigTLS(httpAddr, "m1", t.TempDir(), routes, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, false); err != nil {
		t.Fatalf("caddy refused the TLS config: %v", err)
	}
	t.Cleanup(func() { caddy.Stop() })
}

// testCert is a certificate for name (serial 42, valid for the hour
// around now), its key, and the certificate's DER.
func testCert(name string) (certPEM, keyPEM string, der []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ = x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	kd, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})), der
}

// httpsClient trusts the certificate der and dials tlsAddr whatever the
// URL's host; it follows no redirect.
func httpsClient(der []byte, tlsAddr string) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(must(x509.ParseCertificate(der)))
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, tlsAddr)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
