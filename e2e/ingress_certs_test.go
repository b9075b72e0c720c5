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
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/plugins/ingress-caddy/acmetest"
	"github.com/ployz/ployz/sdk/ingress"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// certsCompose routes three kinds of hostname to one Service: one a user
// certificate covers, a wildcard in the DNS provider's zone (a wildcard
// certificate through DNS-01) and a wildcard outside it whose names get
// their certificates at their first handshake (tls: on_demand, HTTP-01).
// Two paths under the user certificate's name carry per-route options:
// /private basic auth (authHash, a bcrypt hash) and /upload a 1 KiB body
// limit. message is the Container's MESSAGE (a new one redeploys). The
// image is this build's testapp by its content tag: a deploy delivers
// the host's image of the tag it names, and another checkout's lab may
// have moved ployz-testapp:latest since this one started.
func certsCompose(message, authHash string) string {
	return fmt.Sprintf(`name: certs
services:
  web:
    image: %s
    environment: {MESSAGE: %q}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    x-ports:
      - hostname: user.example.test
        container_port: 8080
      - hostname: user.example.test
        path: /private
        container_port: 8080
        basic_auth:
          realm: lab
          users: {alice: %q}
      - hostname: user.example.test
        path: /upload
        container_port: 8080
        max_body_size: 1024
      - hostname: "*.w.example.test"
        container_port: 8080
      - hostname: "*.od.example.test"
        container_port: 8080
        tls: on_demand
`, lab.TestAppRef(), message, strings.ReplaceAll(authHash, "$", "$$"))
}

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
//     one no route names, fail their handshakes and order nothing;
//   - per-route options on paths under the user certificate's name, on
//     both Machines: basic auth refuses no or wrong credentials (401) and
//     admits the right ones; a body over the limit is refused (413), one
//     under it reaches the Container;
//   - a WebSocket through each Machine keeps echoing across a redeploy
//     (a new MESSAGE) until the drain window ends it with a close frame
//     1001, and a new one then reaches the new Container; a gRPC unary
//     call and a server stream (health Check, Watch) likewise, the stream
//     ended with UNAVAILABLE.
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

	const authPass = "lab-pass"
	authHash, err := bcrypt.GenerateFromPassword([]byte(authPass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	deployed := time.Now()
	doc, errs, code := deployFile(t, op, certsCompose("certs", string(authHash)))
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
	optionsStart := time.Now()
	checkRouteOptions(t, l, userRoots, "alice", authPass)
	t.Logf("basic auth and body limit checked on both Machines in %s", time.Since(optionsStart).Round(10*time.Millisecond))

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

	// 4. WebSockets and gRPC across a redeploy.
	wsStart := time.Now()
	checkWebSocketRedeploy(t, l, op, userRoots, certsCompose("certs-v2", string(authHash)))
	if p.Orders() != 2 || p.Issued() != 2 {
		t.Errorf("pebble after the redeploy: %d orders, %d certificates; want still 2 and 2", p.Orders(), p.Issued())
	}
	t.Logf("WebSocket and gRPC redeploy step took %s", time.Since(wsStart).Round(100*time.Millisecond))
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
	req, err := http.NewRequest(http.MethodGet, "https://"+name+"/", nil)
	if err != nil {
		return nil, "", err
	}
	leaf, resp, body, err := tlsDoOnce(ip, req, roots, timeout)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return leaf, body, err
}

// tlsDoOnce sends req on one new TLS connection to ip:443 (the name
// req's host, the chain verified against roots) and returns the served
// leaf, the response and its body, whatever the status. One attempt, no
// retry, no redirect followed.
func tlsDoOnce(ip string, req *http.Request, roots *x509.CertPool, timeout time.Duration) (*x509.Certificate, *http.Response, string, error) {
	conn, err := tlsDialOnce(ip, req.URL.Hostname(), roots, timeout)
	if err != nil {
		return nil, nil, "", err
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	req.Close = true
	if err := req.Write(conn); err != nil {
		return leaf, nil, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return leaf, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return leaf, resp, string(b), err
}

// tlsDialOnce opens one TLS connection (HTTP/1.1 by ALPN) to ip:443 for
// name, the chain verified against roots, with a deadline timeout away.
func tlsDialOnce(ip, name string, roots *x509.CertPool, timeout time.Duration) (*tls.Conn, error) {
	raw, err := net.DialTimeout("tcp", ip+":443", 5*time.Second)
	if err != nil {
		return nil, err
	}
	raw.SetDeadline(time.Now().Add(timeout)) // an on-demand handshake waits for its certificate
	conn := tls.Client(raw, &tls.Config{ServerName: name, RootCAs: roots, NextProtos: []string{"http/1.1"}})
	if err := conn.Handshake(); err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}

// checkRouteOptions checks, through each Machine with one request per
// case: /private refuses no and wrong credentials with 401 naming the
// realm and admits user:pass; /upload refuses a body over its 1 KiB limit
// with 413 and passes one under it to the Container.
func checkRouteOptions(t *testing.T, l *lab.Lab, roots *x509.CertPool, user, pass string) {
	t.Helper()
	type check struct {
		what, method, path string
		auth               []string // user, password
		body               int
		want               int
	}
	checks := []check{
		{"no credentials", http.MethodGet, "/private", nil, 0, http.StatusUnauthorized},
		{"a wrong password", http.MethodGet, "/private", []string{user, pass + "x"}, 0, http.StatusUnauthorized},
		{"an unknown user", http.MethodGet, "/private", []string{"mallory", pass}, 0, http.StatusUnauthorized},
		{"the right credentials", http.MethodGet, "/private", []string{user, pass}, 0, http.StatusOK},
		{"a body over the limit", http.MethodPost, "/upload", nil, 2048, http.StatusRequestEntityTooLarge},
		{"a body under the limit", http.MethodPost, "/upload", nil, 512, http.StatusOK},
	}
	for _, m := range l.Machines {
		for _, c := range checks {
			req, err := http.NewRequest(c.method, "https://user.example.test"+c.path, strings.NewReader(strings.Repeat("x", c.body)))
			if err != nil {
				t.Fatal(err)
			}
			if c.auth != nil {
				req.SetBasicAuth(c.auth[0], c.auth[1])
			}
			_, resp, body, err := tlsDoOnce(m.IP.String(), req, roots, 10*time.Second)
			if err != nil {
				t.Errorf("%s %s with %s through %s: %v", c.method, c.path, c.what, m.Name, err)
				continue
			}
			if resp.StatusCode != c.want {
				t.Errorf("%s %s with %s through %s: %d %q, want %d", c.method, c.path, c.what, m.Name, resp.StatusCode, body, c.want)
			}
			switch {
			case c.want == http.StatusOK && !strings.Contains(body, `"path":"`+c.path+`"`):
				t.Errorf("%s %s with %s through %s: %q did not come from the Container", c.method, c.path, c.what, m.Name, body)
			case c.want == http.StatusUnauthorized && !strings.Contains(resp.Header.Get("WWW-Authenticate"), `realm="lab"`):
				t.Errorf("%s %s with %s through %s: WWW-Authenticate %q, want the realm lab", c.method, c.path, c.what, m.Name, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
}

// wsDrainWindow is the proxy's drain window (docs/ingress.md, "Long-lived
// streams on a redeploy"): a WebSocket open on a retired Container is
// ended no earlier than this after its Serving Pointer moved.
const wsDrainWindow = 10 * time.Second

// wsEcho is what one echo loop saw: each answer and when it came, and how
// the connection ended.
type wsEcho struct {
	machine string
	answers []string
	last    time.Time // the last answer
	ended   time.Time
	err     error // what Receive returned at the end
	code    int   // the close frame's status, 0 without one
}

// checkWebSocketRedeploy opens a WebSocket to user.example.test/ws and a
// gRPC health Watch through each Machine, echoes a message on each every 200 ms while it
// redeploys compose (a new MESSAGE), and checks that each connection
// answered from the old Container until the proxy ended it with a close
// frame 1001, no earlier than the drain window after the deploy began
// and before the deploy finished; then a new WebSocket through each
// Machine reaches the new Container. Each Watch likewise stays open until
// the drain window ends it with UNAVAILABLE, and a Check then reaches the
// new Container.
func checkWebSocketRedeploy(t *testing.T, l *lab.Lab, op *operator, roots *x509.CertPool, compose string) {
	t.Helper()
	echoes := make(chan wsEcho, len(l.Machines))
	for _, m := range l.Machines {
		ws, tail, err := wsDialOnce(m.IP.String(), "user.example.test", roots)
		if err != nil {
			t.Fatalf("WebSocket through %s: %v", m.Name, err)
		}
		defer ws.Close()
		go func() { echoes <- wsEchoLoop(m.Name, ws, tail) }()
	}
	watches := make(chan grpcEnd, len(l.Machines))
	for _, m := range l.Machines {
		hc := healthClient(t, m.IP.String(), roots)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "certs"}); err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("gRPC Check through %s: %v %v", m.Name, res, err)
		}
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "certs"})
		if err == nil {
			_, err = w.Recv()
		}
		if err != nil {
			t.Fatalf("gRPC Watch through %s: %v", m.Name, err)
		}
		go func() {
			for {
				if _, err := w.Recv(); err != nil {
					watches <- grpcEnd{m.Name, time.Now(), err}
					return
				}
			}
		}()
	}
	time.Sleep(time.Second) // a few echoes before the redeploy
	began := time.Now()
	doc, errs, code := deployFile(t, op, compose)
	finished := time.Now()
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("redeploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	t.Logf("redeployed in %s", finished.Sub(began).Round(100*time.Millisecond))
	failed := false
	defer func() {
		if !failed && !t.Failed() {
			return
		}
		for _, st := range doc.Outcome.Steps {
			t.Logf("redeploy step %s %s %s: %s %dms %s", st.Machine, st.Action, st.Container, st.Status, st.DurationMS, st.Error)
		}
		for _, m := range l.Machines {
			out, _ := l.Exec(context.Background(), m.Name, "sh", "-c",
				"journalctl -u ployz-plugin@ingress-caddy --no-pager -o short-precise --since -2min | grep -i -E 'acking|drain|stream|retire|pointer|websocket' | tail -40")
			t.Logf("%s ingress log:\n%s", m.Name, out)
		}
	}()
	for range l.Machines {
		var e wsEcho
		select {
		case e = <-echoes:
		case <-time.After(10 * time.Second):
			t.Fatalf("a WebSocket still open 10 s after the redeploy finished")
		}
		t.Logf("WebSocket through %s: %d answers, the last %s before its end; ended %s after the redeploy began (%s before it finished) by %v, close status %d",
			e.machine, len(e.answers), e.ended.Sub(e.last).Round(time.Millisecond), e.ended.Sub(began).Round(100*time.Millisecond),
			finished.Sub(e.ended).Round(100*time.Millisecond), e.err, e.code)
		if e.code != 1001 || !errors.Is(e.err, io.EOF) {
			t.Errorf("WebSocket through %s ended by %v with close status %d, want a close frame 1001", e.machine, e.err, e.code)
		}
		if e.ended.Before(began.Add(wsDrainWindow)) || e.ended.After(finished.Add(time.Second)) {
			t.Errorf("WebSocket through %s ended %s after the redeploy began, want between the drain window (%s) and its end (%s)",
				e.machine, e.ended.Sub(began), wsDrainWindow, finished.Sub(began))
		}
		if e.last.Before(e.ended.Add(-time.Second)) || e.last.Before(began) {
			t.Errorf("WebSocket through %s: last answer %s before its end, want answers until it ended", e.machine, e.ended.Sub(e.last))
		}
		for _, a := range e.answers {
			if !strings.HasSuffix(a, " (certs)") {
				t.Errorf("WebSocket through %s answered %q, want the old Container (certs) until its end", e.machine, a)
				break
			}
		}
	}
	for range l.Machines {
		var g grpcEnd
		select {
		case g = <-watches:
		case <-time.After(10 * time.Second):
			t.Fatalf("a gRPC Watch still open 10 s after the redeploy finished")
		}
		t.Logf("gRPC Watch through %s ended %s after the redeploy began (%s before it finished): %v",
			g.machine, g.ended.Sub(began).Round(100*time.Millisecond), finished.Sub(g.ended).Round(100*time.Millisecond), g.err)
		if status.Code(g.err) != codes.Unavailable {
			t.Errorf("gRPC Watch through %s ended with %v, want UNAVAILABLE", g.machine, g.err)
		}
		if g.ended.Before(began.Add(wsDrainWindow)) || g.ended.After(finished.Add(time.Second)) {
			t.Errorf("gRPC Watch through %s ended %s after the redeploy began, want between the drain window (%s) and its end (%s)",
				g.machine, g.ended.Sub(began), wsDrainWindow, finished.Sub(began))
		}
	}
	for _, m := range l.Machines {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := healthClient(t, m.IP.String(), roots).Check(ctx, &healthpb.HealthCheckRequest{Service: "certs-v2"})
		cancel()
		if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("gRPC Check of certs-v2 through %s: %v %v, want the new Container SERVING", m.Name, res, err)
		}
	}
	for _, m := range l.Machines {
		ws, _, err := wsDialOnce(m.IP.String(), "user.example.test", roots)
		if err != nil {
			t.Errorf("new WebSocket through %s: %v (a GET /ws answers %s)", m.Name, err, wsRefusal(m.IP.String(), roots))
			continue
		}
		var got string
		err = websocket.Message.Send(ws, "new")
		if err == nil {
			err = websocket.Message.Receive(ws, &got)
		}
		ws.Close()
		if err != nil || !strings.HasPrefix(got, "new from ") || !strings.HasSuffix(got, " (certs-v2)") {
			t.Errorf("new WebSocket through %s: %q %v, want an echo from the new Container (certs-v2)", m.Name, got, err)
		}
	}
}

// grpcEnd is how a gRPC stream through a Machine ended.
type grpcEnd struct {
	machine string
	ended   time.Time
	err     error
}

// healthClient is a gRPC health client on a new connection to ip:443 for
// user.example.test (HTTP/2 by ALPN, the chain verified against roots).
func healthClient(t *testing.T, ip string, roots *x509.CertPool) healthpb.HealthClient {
	t.Helper()
	creds := credentials.NewTLS(&tls.Config{ServerName: "user.example.test", RootCAs: roots})
	cc, err := grpc.NewClient("passthrough:///"+ip+":443", grpc.WithTransportCredentials(creds), grpc.WithAuthority("user.example.test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// wsRefusal is what a WebSocket handshake on /ws is answered, for a
// failure message.
func wsRefusal(ip string, roots *x509.CertPool) string {
	req, _ := http.NewRequest(http.MethodGet, "https://user.example.test/ws", nil)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Origin", "https://user.example.test")
	_, resp, body, err := tlsDoOnce(ip, req, roots, 5*time.Second)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d %q", resp.StatusCode, body)
}

// wsEchoLoop sends a numbered message every 200 ms and reads its echo
// until the connection ends.
func wsEchoLoop(machine string, ws *websocket.Conn, tail *tailConn) wsEcho {
	e := wsEcho{machine: machine}
	for i := 0; ; i++ {
		msg := fmt.Sprint(i)
		err := websocket.Message.Send(ws, msg)
		var got string
		if err == nil {
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			err = websocket.Message.Receive(ws, &got)
		}
		if err != nil {
			e.ended, e.err, e.code = time.Now(), err, tail.closeCode()
			return e
		}
		if !strings.HasPrefix(got, msg+" from ") {
			e.ended, e.err = time.Now(), fmt.Errorf("echo of %q: %q", msg, got)
			return e
		}
		e.answers, e.last = append(e.answers, got), time.Now()
		time.Sleep(200 * time.Millisecond)
	}
}

// wsDialOnce opens a WebSocket to wss://name/ws through ip:443 (one
// attempt), reading through a tailConn so its close status can be known:
// golang.org/x/net/websocket reports a close frame as io.EOF, as it does
// a connection that just ends.
func wsDialOnce(ip, name string, roots *x509.CertPool) (*websocket.Conn, *tailConn, error) {
	conn, err := tlsDialOnce(ip, name, roots, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	conn.SetDeadline(time.Time{})
	cfg, err := websocket.NewConfig("wss://"+name+"/ws", "https://"+name)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	tail := &tailConn{Conn: conn}
	ws, err := websocket.NewClient(cfg, tail)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return ws, tail, nil
}

// tailConn keeps the last bytes read from its connection.
type tailConn struct {
	net.Conn
	mu   sync.Mutex
	tail []byte
}

func (c *tailConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.tail = append(c.tail, p[:n]...)
	if len(c.tail) > 256 {
		c.tail = slices.Clone(c.tail[len(c.tail)-256:])
	}
	c.mu.Unlock()
	return n, err
}

// closeCode is the status of the close frame the server's bytes ended
// with (an unmasked 0x88 frame, short payload, status first), or 0 when
// they ended otherwise (in the middle of a frame, or after a data frame:
// the connection was cut, not closed). The echoes are ASCII text, so no
// byte of theirs is mistaken for the frame's first.
func (c *tailConn) closeCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.tail) - 2; i >= 0; i-- {
		if n := len(c.tail) - i - 2; c.tail[i] == 0x88 && int(c.tail[i+1]) == n && n >= 2 && n < 126 {
			return int(binary.BigEndian.Uint16(c.tail[i+2:]))
		}
	}
	return 0
}
