package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/plugins/ingress-caddy/acmetest"
	"github.com/ployz/ployz/sdk/ingress"
)

// certsCompose routes three kinds of hostname to one Service: one a user
// certificate covers, a wildcard in the DNS provider's zone (a wildcard
// certificate through DNS-01) and a wildcard outside it whose names get
// their certificates at their first handshake (tls: on_demand, HTTP-01).
const certsCompose = `name: certs
services:
  web:
    image: ployz-testapp:latest
    environment: {MESSAGE: "certs"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    x-ports:
      - hostname: user.example.test
        container_port: 8080
      - hostname: "*.w.example.test"
        container_port: 8080
      - hostname: "*.od.example.test"
        container_port: 8080
        tls: on_demand
`

// TestIngressCertificates checks the certificate features CLI → daemon →
// ingress on two lab Machines, against a real ACME CA (Pebble) whose DNS
// is a real BIND the test runs on the lab network:
//   - `cert add` of a certificate from the test's own CA: served by both
//     Machines for its name, listed by `cert ls` with its expiry (and the
//     warning, since it expires within 21 days), no ACME order;
//   - `cert dns-provider set` (RFC 2136 + TSIG into BIND's zone
//     w.example.test): the wildcard route *.w.example.test gets one
//     wildcard certificate through DNS-01, served by both Machines for two
//     names under it; the TXT record is gone afterwards;
//   - tls: on_demand on *.od.example.test (outside the provider's zone, so
//     HTTP-01, BIND resolving the names to m1): a name under it gets its
//     certificate at its first handshake; a name two labels under it, and
//     one no route names, fail their handshakes and order nothing.
//
// Every client call is a single attempt (one TLS handshake, one request
// on it) verifying the chain against the issuing root; only the CLI's
// `ingress config` is polled to learn when a certificate is loaded.
func TestIngressCertificates(t *testing.T) {
	needLightLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	pebbleBin := t.TempDir()
	built := make(chan error, 1)
	go func() { built <- acmetest.Build(pebbleBin) }() // beside the lab's start
	l := lab.ForTest(t, 2)
	op := newOperator(t, l)
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	m1, m2 := l.Machines[0], l.Machines[1]
	gw := hostOnLab(t, ctx, l)
	bind := acmetest.StartBINDWith(t, "w.example.test", acmetest.BINDOptions{Listen: gw,
		Static: map[string][]string{"od.example.test": {"* IN A " + m1.IP.String()}}})
	p := acmetest.Start(t, acmetest.Options{Bind: gw, HTTPPort: 80, DNSServer: bind.Addr, BinDir: pebbleBin})
	const onDemand = "shop.od.example.test"
	pointAtPebble(t, ctx, l, p, m1.IP.String()+" "+onDemand)
	formCluster(t, l, op)
	// A Machine that just joined advertises its ingress's TLS capabilities
	// once its proxy holds the spec with ACME and the Cluster secret;
	// until then a plan with tls: on_demand is refused (as for an older
	// release) and cert add notes the Machine.
	eventually(t, 90*time.Second, "every Machine advertises its ingress's TLS capabilities", func() error {
		var list rpc.MachineList
		op.json(t, &list, "machine", "ls")
		for _, m := range list.Machines {
			for _, c := range []string{ingress.CapTLSOnDemand, ingress.CapUserCerts, ingress.CapDNS01} {
				if !slices.Contains(m.Capabilities, c) {
					return fmt.Errorf("%s lacks %s", m.Name, c)
				}
			}
		}
		if len(list.Machines) != 2 {
			return fmt.Errorf("%d Machines listed", len(list.Machines))
		}
		return nil
	})
	t.Logf("lab, BIND, Pebble and Cluster ready %s after the start", time.Since(start).Round(100*time.Millisecond))

	// 1. A user certificate, added before the route exists: no ACME order
	// is ever placed for its name.
	userRoots, userLeaf := addUserCert(t, op, "user.example.test")
	// 2. The DNS provider for the wildcard's zone.
	secretFile := filepath.Join(t.TempDir(), "tsig")
	if err := os.WriteFile(secretFile, []byte(bind.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var prov client.DNSProvider
	op.json(t, &prov, "cert", "dns-provider", "set", "lab", "--provider", "rfc2136", "--zone", bind.Zone,
		"--server", bind.Addr, "--tsig-key", bind.KeyName, "--tsig-secret-file", secretFile)
	if raw, _ := json.Marshal(prov); strings.Contains(string(raw), bind.Secret) {
		t.Errorf("dns-provider set printed the secret: %s", raw)
	}

	deployed := time.Now()
	doc, errs, code := deployFile(t, op, certsCompose)
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	t.Logf("deployed in %s", time.Since(deployed).Round(100*time.Millisecond))

	certLoaded(t, op, "user.example.test", ingress.CertSourceUser)
	for _, m := range l.Machines {
		leaf, body, err := tlsGetOnce(m.IP.String(), "user.example.test", userRoots, 10*time.Second)
		if err != nil || !strings.Contains(body, `"message":"certs"`) {
			t.Errorf("https://user.example.test through %s: %s %v", m.Name, body, err)
		} else if !leaf.Equal(userLeaf) {
			t.Errorf("%s serves %s for user.example.test, not the added certificate", m.Name, leaf.SerialNumber)
		}
	}
	t.Logf("user certificate served by both Machines %s after the deploy", time.Since(deployed).Round(100*time.Millisecond))

	roots := p.Roots(t)
	certLoaded(t, op, "*.w.example.test", "")
	t.Logf("wildcard certificate issued through DNS-01 and loaded on both Machines %s after the deploy", time.Since(deployed).Round(100*time.Millisecond))
	var serial string
	for _, m := range l.Machines {
		for _, name := range []string{"a.w.example.test", "b.w.example.test"} {
			leaf, body, err := tlsGetOnce(m.IP.String(), name, roots, 10*time.Second)
			if err != nil || !strings.Contains(body, `"message":"certs"`) {
				t.Errorf("https://%s through %s: %s %v", name, m.Name, body, err)
				continue
			}
			if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "*.w.example.test" {
				t.Errorf("%s through %s: certificate for %v, want the wildcard", name, m.Name, leaf.DNSNames)
			}
			if s := leaf.SerialNumber.Text(16); serial == "" {
				serial = s
			} else if s != serial {
				t.Errorf("%s through %s: serial %s, another Machine or name got %s", name, m.Name, s, serial)
			}
		}
	}
	if txt := bind.TXT(t, "_acme-challenge.w.example.test"); len(txt) != 0 {
		t.Errorf("_acme-challenge.w.example.test still holds TXT %q", txt)
	}
	if !strings.Contains(bind.Log(), "adding an RR at '_acme-challenge.w.example.test'") {
		t.Errorf("BIND logged no challenge record:\n%s", bind.Log())
	}
	if p.Orders() != 1 || p.Issued() != 1 {
		t.Errorf("pebble after DNS-01: %d orders, %d certificates; want 1 and 1 (none for the user certificate's name)", p.Orders(), p.Issued())
	}

	// 3. On demand: the first handshake for a name under the wildcard
	// waits for its certificate (at most 90 s); m1 then serves it too.
	asked := time.Now()
	for _, m := range []*lab.Machine{m2, m1} {
		leaf, body, err := tlsGetOnce(m.IP.String(), onDemand, roots, 100*time.Second)
		if err != nil || !strings.Contains(body, `"message":"certs"`) {
			t.Errorf("first https://%s through %s: %s %v\n%s", onDemand, m.Name, body, err, onDemandState(t, op))
		} else if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != onDemand {
			t.Errorf("%s through %s: certificate for %v", onDemand, m.Name, leaf.DNSNames)
		}
		t.Logf("first handshake for %s through %s completed %s after the first was asked", onDemand, m.Name, time.Since(asked).Round(100*time.Millisecond))
	}
	for _, name := range []string{"a.b.od.example.test", "nope.example.test"} {
		refused := time.Now()
		_, _, err := tlsGetOnce(m1.IP.String(), name, roots, 20*time.Second)
		if err == nil {
			t.Errorf("https://%s through m1 answered; want a failed handshake", name)
		}
		t.Logf("https://%s through m1: %v (after %s)", name, err, time.Since(refused).Round(10*time.Millisecond))
	}
	if p.Orders() != 2 || p.Issued() != 2 {
		t.Errorf("pebble at the end: %d orders, %d certificates; want 2 and 2 (the wildcard, %s)", p.Orders(), p.Issued(), onDemand)
	}
	t.Logf("cert ls:\n%s", op.must(t, "cert", "ls"))
	t.Logf("TestIngressCertificates took %s (%s after the Cluster was ready)", time.Since(start).Round(100*time.Millisecond), time.Since(deployed).Round(100*time.Millisecond))
}

// pointAtPebble points every Machine's daemon at Pebble (ployz.env, read
// at start) and appends hosts to its /etc/hosts, so that the hostname
// check before an HTTP-01 order reaches the Cluster as the CA does.
func pointAtPebble(t *testing.T, ctx context.Context, l *lab.Lab, p *acmetest.Pebble, hosts string) {
	t.Helper()
	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf("%s=%s\n%s=/etc/ployz/acme-ca.pem\n%s=5\n", ingress.EnvACMEDirectory, p.Directory,
		ingress.EnvACMECAFile, ingress.EnvACMERankDelay)
	for _, m := range l.Machines {
		script := fmt.Sprintf("mkdir -p /etc/ployz && printf '%%s' '%s' > /etc/ployz/acme-ca.pem && printf '%%s' '%s' > /etc/ployz/ployz.env && echo '%s' >> /etc/hosts && systemctl try-restart ployz.service",
			ca, env, hosts)
		if out, err := l.Exec(ctx, m.Name, "sh", "-c", script); err != nil {
			t.Fatalf("%s: %v %s", m.Name, err, out)
		}
	}
}

// addUserCert makes a CA and a leaf for host expiring in 10 days, adds
// them with `ployz cert add --cert --key`, and checks `cert ls` lists the
// leaf with its expiry and the warning. It returns the CA as a pool and
// the leaf.
func addUserCert(t *testing.T, op *operator, host string) (*x509.CertPool, *x509.Certificate) {
	t.Helper()
	now := time.Now()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lab user CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	notAfter := now.Add(10 * 24 * time.Hour).Truncate(time.Second)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: host}, DNSNames: []string{host}, NotBefore: now.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(leafDER)
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "site.pem"), filepath.Join(dir, "site.key")
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	if err := os.WriteFile(certFile, chain, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	var added client.Certificate
	op.json(t, &added, "cert", "add", "--cert", certFile, "--key", keyFile)
	if added.ID == "" || added.Source != ingress.CertSourceUser || len(added.Notes) != 0 {
		t.Fatalf("cert add: %+v", added)
	}
	var ls client.Certificates
	op.json(t, &ls, "cert", "ls")
	found := false
	for _, c := range ls.Certificates {
		if c.ID != added.ID {
			continue
		}
		found = true
		if c.NotAfter != notAfter.Unix() || len(c.Names) != 1 || c.Names[0] != host || !strings.HasPrefix(c.Warning, "expires in ") {
			t.Errorf("cert ls shows %+v; want %s expiring at %d with a warning", c, host, notAfter.Unix())
		}
	}
	if !found {
		t.Errorf("cert ls does not list %s: %+v", added.ID, ls)
	}
	if out := op.must(t, "cert", "ls"); !strings.Contains(out, added.ID) || !strings.Contains(out, notAfter.UTC().Format(time.DateOnly)) {
		t.Errorf("cert ls does not show %s with its expiry %s:\n%s", added.ID, notAfter.UTC().Format(time.DateOnly), out)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, leaf
}

// certLoaded polls `ingress config --json` until every Machine reports
// host's certificate issued (and from source, "" for ACME).
func certLoaded(t *testing.T, op *operator, host, source string) {
	t.Helper()
	eventually(t, 2*time.Minute, host+" certificate loaded on every Machine", func() error {
		out := op.must(t, "ingress", "config", "--json")
		var ms []struct {
			Machine string          `json:"machine"`
			Status  *ingress.Status `json:"status"`
			Error   string          `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &ms); err != nil {
			return err
		}
		for _, m := range ms {
			if m.Status == nil {
				return fmt.Errorf("%s: %s", m.Machine, m.Error)
			}
			var c *ingress.CertificateState
			for i := range m.Status.Certificates {
				if m.Status.Certificates[i].Hostname == host {
					c = &m.Status.Certificates[i]
				}
			}
			if c == nil || c.State != ingress.CertIssued || c.Source != source {
				return fmt.Errorf("%s: %+v (skipped %+v)", m.Machine, c, m.Status.SkippedCertificates)
			}
		}
		if len(ms) != 2 {
			return fmt.Errorf("%d Machines answered", len(ms))
		}
		return nil
	})
}

// onDemandState is what `ingress config` says, for a failure message.
func onDemandState(t *testing.T, op *operator) string {
	out, _, _ := op.run(t, "ingress", "config")
	return out
}

// tlsGetOnce opens one TLS connection to ip:443 for name, verifying the
// chain against roots, sends one GET / on it and returns the served leaf
// and the body. No retry: a failed handshake or request is the answer.
func tlsGetOnce(ip, name string, roots *x509.CertPool, timeout time.Duration) (*x509.Certificate, string, error) {
	raw, err := net.DialTimeout("tcp", ip+":443", 5*time.Second)
	if err != nil {
		return nil, "", err
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(timeout)) // an on-demand handshake waits for its certificate
	conn := tls.Client(raw, &tls.Config{ServerName: name, RootCAs: roots, NextProtos: []string{"http/1.1"}})
	if err := conn.Handshake(); err != nil {
		return nil, "", err
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", name); err != nil {
		return leaf, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return leaf, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return leaf, string(b), fmt.Errorf("status %d", resp.StatusCode)
	}
	return leaf, string(b), nil
}
