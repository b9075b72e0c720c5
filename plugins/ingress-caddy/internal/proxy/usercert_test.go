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
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/acme"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// certStore is an in-memory certificates and machines table.
type certStore struct {
	mu    sync.Mutex
	certs map[string]store.Row[store.CertificateBody]
}

func (s *certStore) Certificates(context.Context) ([]store.Row[store.CertificateBody], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Row[store.CertificateBody]
	for _, r := range s.certs {
		out = append(out, r)
	}
	return out, nil
}

func (s *certStore) PutCertificate(_ context.Context, r store.Row[store.CertificateBody]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.certs[r.Key] = r
	return nil
}

func (s *certStore) Machines(context.Context) ([]store.Row[store.MachineBody], error) {
	return []store.Row[store.MachineBody]{{Key: "m1", Body: store.MachineBody{Phase: "participating",
		Capabilities: []string{ingress.CapHTTP, ingress.CapSealedKeys, ingress.CapUserCerts}}}}, nil
}

// A user certificate row (key sealed with the Cluster key, as ployzd
// writes it) is served by real Caddy for the names it covers, wildcard
// SANs included, in preference to the ACME row of the same name; a name
// it does not cover gets no handshake.
func TestCaddyServesUserCertificate(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "backend") }))
	defer backend.Close()
	secret, _ := store.NewClusterSecret()
	secretFile := filepath.Join(t.TempDir(), "cluster-secret")
	if err := os.WriteFile(secretFile, []byte(secret.Hex()), 0o600); err != nil {
		t.Fatal(err)
	}
	sealer, _ := acme.NewSealer(secret)

	userPEM, userKey, userDER := userTestCert(t, 77, "a.user.test", "*.wild.test")
	u, err := ingress.CheckUserCertificate([]byte(userPEM), []byte(userKey), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	row := ingress.UserCertRow(u.ID)
	sealed, err := sealer.Seal(row, u.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	acmePEM, acmeKey, _ := testCert("a.user.test") // serial 42: must lose to the user's
	st := &certStore{certs: map[string]store.Row[store.CertificateBody]{
		row: {Key: row, Body: store.CertificateBody{Source: ingress.CertSourceUser, Domains: u.Names, CertPEM: u.CertPEM,
			KeyPEM: sealed, NotBefore: u.NotBefore.Unix(), NotAfter: u.NotAfter.Unix(), CA: u.Issuer}},
		"a.user.test": {Key: "a.user.test", Body: store.CertificateBody{CertPEM: acmePEM, KeyPEM: acmeKey,
			NotBefore: time.Now().Add(-time.Hour).Unix(), NotAfter: time.Now().Add(time.Hour).Unix(), Issuer: "m1"}},
	}}

	httpAddr, tlsAddr := freePort(t), freePort(t)
	spec := ingress.Spec{Machine: "m1", ListenTLS: tlsAddr, StateDir: t.TempDir(), ClusterSecretFile: secretFile,
		ACME: &ingress.ACMESpec{Directory: "https://acme.invalid/directory"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	certs, err := startCertificates(ctx, spec, st, hclog.NewNullLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer certs.stop()
	up := []string{backend.Listener.Addr().String()}
	routes := []ingress.Route{
		{Hostname: "a.user.test", Owner: "p/web", State: "published", Upstreams: up},
		{Hostname: "*.wild.test", Owner: "p/web", State: "published", Upstreams: up},
	}
	certs.tls(routes)
	certs.refresh(ctx)
	in := certs.tls(routes)
	if len(in.Certificates) != 2 {
		t.Fatalf("loaded %d certificates, want the user's for both routes: %+v", len(in.Certificates), in.Certificates)
	}
	var status ingress.Status
	certs.status(&status)
	for _, s := range status.Certificates {
		if s.Source != ingress.CertSourceUser || s.State != ingress.CertIssued {
			t.Errorf("status %+v, want issued from the user certificate", s)
		}
	}
	loadTLS(t, httpAddr, routes, in)

	for _, sni := range []string{"a.user.test", "x.wild.test"} {
		c, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) // the test checks the serial
		if err != nil {
			t.Fatalf("handshake %s: %v", sni, err)
		}
		if got := c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); got != 77 {
			t.Errorf("handshake %s served serial %d, want the user certificate's 77", sni, got)
		}
		c.Close()
	}
	for _, sni := range []string{"other.test", "a.b.wild.test"} {
		if c, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: sni, InsecureSkipVerify: true}); err == nil { // no certificate is expected at all
			c.Close()
			t.Errorf("handshake %s completed; no certificate covers it", sni)
		}
	}
	resp, err := httpsClient(userDER, tlsAddr).Get("https://x.wild.test/")
	if err != nil {
		t.Fatalf("https x.wild.test: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "backend" {
		t.Fatalf("https x.wild.test: %d %q", resp.StatusCode, b)
	}
}

// userTestCert is a self-signed certificate for names (the hour around
// now), its PKCS#8 key and its DER.
func userTestCert(t *testing.T, serial int64, names ...string) (certPEM, keyPEM string, der []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})), der
}
