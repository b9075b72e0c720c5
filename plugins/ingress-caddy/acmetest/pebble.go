// Package acmetest runs a real ACME CA for tests: Let's Encrypt's Pebble,
// with pebble-challtestsrv as its DNS (every name resolves to one IPv4
// address), validating HTTP-01 for real; or with a real BIND (StartBIND)
// as its DNS, validating DNS-01 for real. The binaries are built from the
// module graph (go.mod's tool directives) with `go build`.
package acmetest

import (
	"bytes"
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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options configure Start.
type Options struct {
	// Bind is the address Pebble listens on and its TLS certificate
	// names (default 127.0.0.1): what the ACME clients dial.
	Bind string
	// ResolveTo is the IPv4 address every name resolves to for
	// validation (default 127.0.0.1); HTTPPort is the port Pebble
	// validates HTTP-01 on there (default 80).
	ResolveTo string
	HTTPPort  int
	// ValiditySeconds is the certificates' lifetime (default 90 days).
	ValiditySeconds int
	// BinDir caches the built binaries across tests (default a temp dir).
	BinDir string
	// DNSServer (host:port), when set, is the DNS Pebble validates with
	// (a real authoritative server such as StartBIND's, for DNS-01)
	// instead of pebble-challtestsrv.
	DNSServer string
}

// Pebble is a running Pebble.
type Pebble struct {
	// Directory is the ACME directory URL.
	Directory string
	// CAFile holds the PEM root of Pebble's own HTTPS certificate: what
	// an ACME client must trust to reach Directory.
	CAFile string
	// Management is the management API's base URL (https, same root).
	Management string
	dns        string
	client     *http.Client
	mu         sync.Mutex
	log        bytes.Buffer
}

var buildMu sync.Mutex

// Build builds pebble and pebble-challtestsrv into dir (once per dir).
func Build(dir string) error {
	buildMu.Lock()
	defer buildMu.Unlock()
	for _, name := range []string{"pebble", "pebble-challtestsrv"} {
		out := filepath.Join(dir, name)
		if _, err := os.Stat(out); err == nil {
			continue
		}
		cmd := exec.Command("go", "build", "-o", out, "github.com/letsencrypt/pebble/v2/cmd/"+name)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v: %s", name, err, b)
		}
	}
	return nil
}

// FreePort returns a TCP port free on host right now.
func FreePort(t testing.TB, host string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs Pebble and its DNS until t ends.
func Start(t testing.TB, o Options) *Pebble {
	t.Helper()
	if o.Bind == "" {
		o.Bind = "127.0.0.1"
	}
	if o.ResolveTo == "" {
		o.ResolveTo = "127.0.0.1"
	}
	if o.HTTPPort == 0 {
		o.HTTPPort = 80
	}
	if o.ValiditySeconds == 0 {
		o.ValiditySeconds = 90 * 24 * 3600
	}
	if o.BinDir == "" {
		o.BinDir = t.TempDir()
	}
	if err := Build(o.BinDir); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caPEM, certPEM, keyPEM, err := serverCert(o.Bind)
	if err != nil {
		t.Fatal(err)
	}
	p := &Pebble{CAFile: filepath.Join(dir, "ca.pem")}
	for name, b := range map[string][]byte{"ca.pem": caPEM, "cert.pem": certPEM, "key.pem": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	p.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	if o.DNSServer != "" {
		p.dns = o.DNSServer
	} else {
		dnsPort, dnsMgmt := FreePort(t, "127.0.0.1"), FreePort(t, "127.0.0.1")
		p.dns = "127.0.0.1:" + strconv.Itoa(dnsPort)
		p.run(t, filepath.Join(o.BinDir, "pebble-challtestsrv"), nil,
			"-dnsserver", p.dns, "-management", "127.0.0.1:"+strconv.Itoa(dnsMgmt),
			"-http01", "", "-https01", "", "-doh", "", "-tlsalpn01", "",
			"-defaultIPv4", o.ResolveTo, "-defaultIPv6", "")
	}

	port, mgmt := FreePort(t, o.Bind), FreePort(t, o.Bind)
	host := o.Bind
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	p.Directory = fmt.Sprintf("https://%s:%d/dir", host, port)
	p.Management = fmt.Sprintf("https://%s:%d", host, mgmt)
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":           net.JoinHostPort(o.Bind, strconv.Itoa(port)),
		"managementListenAddress": net.JoinHostPort(o.Bind, strconv.Itoa(mgmt)),
		"certificate":             filepath.Join(dir, "cert.pem"),
		"privateKey":              filepath.Join(dir, "key.pem"),
		"httpPort":                o.HTTPPort,
		"tlsPort":                 FreePort(t, "127.0.0.1"),
		"ocspResponderURL":        "",
		"retryAfter":              map[string]int{"authz": 1, "order": 1},
		"keyAlgorithm":            "ecdsa",
		"profiles": map[string]any{"default": map[string]any{
			"description": "tests", "validityPeriod": o.ValiditySeconds}},
	}}
	cb, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "pebble.json"), cb, 0o600); err != nil {
		t.Fatal(err)
	}
	// Real validation (no PEBBLE_VA_ALWAYS_VALID), no sleeps, no nonce
	// rejections, no authorization reuse: every order is validated.
	env := []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"}
	p.run(t, filepath.Join(o.BinDir, "pebble"), env,
		"-config", filepath.Join(dir, "pebble.json"), "-dnsserver", p.dns)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := p.client.Get(p.Directory)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebble did not answer %s: %v\n%s", p.Directory, err, p.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p
}

// run starts a binary whose output goes to the Pebble log, killed when
// t ends.
func (p *Pebble) run(t testing.TB, bin string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	w := &lockedWriter{p: p}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // it may have exited
		cmd.Wait()         // killed
	})
}

type lockedWriter struct{ p *Pebble }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.log.Write(b)
}

// Log is everything Pebble and its DNS printed.
func (p *Pebble) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Issued counts the certificates Pebble issued ("Issued certificate
// serial" lines in its log).
func (p *Pebble) Issued() int { return strings.Count(p.Log(), "Issued certificate serial") }

// Orders counts the orders Pebble accepted.
func (p *Pebble) Orders() int { return strings.Count(p.Log(), "Added order") }

// Roots returns Pebble's issuing root (management /roots/0) as a pool.
func (p *Pebble) Roots(t testing.TB) *x509.CertPool {
	t.Helper()
	resp, err := p.client.Get(p.Management + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if resp.StatusCode != 200 || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble roots: %d %s", resp.StatusCode, b)
	}
	return pool
}

// serverCert makes a CA and a certificate for host (an IP or a name)
// signed by it, all PEM.
func serverCert(host string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "acmetest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(host); ip != nil {
		leaf.IPAddresses = []net.IP{ip}
	} else {
		leaf.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), nil
}
