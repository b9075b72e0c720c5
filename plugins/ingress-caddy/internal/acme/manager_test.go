package acme

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/plugins/ingress-caddy/acmetest"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

var pebbleBin string // built once for the package's tests

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ployz-pebble-")
	if err != nil {
		panic(err)
	}
	pebbleBin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func startPebble(t *testing.T, httpPort, validity int) *acmetest.Pebble {
	if testing.Short() {
		prereq.Skip(t, "-short: builds and runs Pebble")
	}
	return acmetest.Start(t, acmetest.Options{HTTPPort: httpPort, ValiditySeconds: validity, BinDir: pebbleBin})
}

// newManager is one Machine's manager on the shared store, running until
// the test ends.
func newManager(t *testing.T, p *acmetest.Pebble, st Store, id string, mod func(*Config)) *Manager {
	t.Helper()
	cfg := Config{Machine: id, Directory: p.Directory, CAFile: p.CAFile, ListenTLS: ":443",
		StateDir: t.TempDir(), RankDelay: 2 * time.Second, Store: st,
		Log:      hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Debug, Output: testWriter{t}}),
		Interval: 100 * time.Millisecond, ChallengeGrace: 200 * time.Millisecond,
		Verify: func(context.Context, string, []string) error { return nil }}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func stateOf(m *Manager, h string) ingress.CertificateState {
	for _, s := range m.Snapshot().States {
		if s.Hostname == h {
			return s
		}
	}
	return ingress.CertificateState{}
}

func leafOf(t *testing.T, certPEM string) (*x509.Certificate, *x509.CertPool) {
	t.Helper()
	rest := []byte(certPEM)
	var leaf *x509.Certificate
	inter := x509.NewCertPool()
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if leaf == nil {
			leaf = c
		} else {
			inter.AddCert(c)
		}
	}
	if leaf == nil {
		t.Fatal("no certificate")
	}
	return leaf, inter
}

// Two Machines want the same hostname: the first by rank issues once
// through real HTTP-01 validation, the second loads the shared row and
// never orders.
func TestIssuesOnceForTheCluster(t *testing.T) {
	r := &responder{}
	port := startResponder(t, r)
	p := startPebble(t, port, 0)
	st := newMemStore("m-a", "m-b")
	keys := testSealer(t, 1)
	sealed := func(c *Config) { c.Keys = keys }
	a := newManager(t, p, st, "m-a", sealed)
	b := newManager(t, p, st, "m-b", sealed)
	r.managers = []*Manager{a, b}
	const h = "app.example.test"
	start := time.Now()
	a.Want([]string{h})
	b.Want([]string{h, h + "."})
	waitFor(t, 30*time.Second, "both Machines load the certificate", func() error {
		for _, m := range []*Manager{a, b} {
			if s := stateOf(m, h); s.State != ingress.CertIssued {
				return fmt.Errorf("%s: %+v", m.cfg.Machine, s)
			}
		}
		return nil
	})
	t.Logf("issued and loaded on both Machines in %s", time.Since(start).Round(time.Millisecond))
	// Past m-b's turn: still one order, one certificate.
	time.Sleep(3 * time.Second)
	if p.Orders() != 1 || p.Issued() != 1 {
		t.Fatalf("pebble: %d orders, %d certificates, want 1 and 1\n%s", p.Orders(), p.Issued(), p.Log())
	}
	if r.served.Load() == 0 {
		t.Fatal("the challenge was never answered")
	}
	row, _ := st.row(h)
	if row.Body.Issuer != "m-a" || row.Body.Challenge != nil || row.Body.Failures != 0 || row.Body.KeyPEM == "" {
		t.Fatalf("row %+v", row.Body)
	}
	sa, sb := a.Snapshot(), b.Snapshot()
	if len(sa.TLS.Certificates) != 1 || len(sb.TLS.Certificates) != 1 || sa.TLS.Certificates[0] != sb.TLS.Certificates[0] {
		t.Fatalf("snapshots differ: %d / %d certificates", len(sa.TLS.Certificates), len(sb.TLS.Certificates))
	}
	if len(sa.TLS.Challenges) != 0 || sa.TLS.Listen != ":443" {
		t.Fatalf("snapshot %+v", sa.TLS)
	}
	leaf, inter := leafOf(t, row.Body.CertPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: p.Roots(t), Intermediates: inter}); err != nil {
		t.Fatalf("the certificate does not verify against Pebble's root: %v", err)
	}
	for _, put := range st.puts {
		if put.Owner != "m-a" {
			t.Fatalf("m-b wrote the row: %+v", put.Body)
		}
		if put.Body.KeyPEM != "" && !strings.HasPrefix(put.Body.KeyPEM, SealedPrefix) {
			t.Fatalf("a private key reached the store in plain text: %.40q", put.Body.KeyPEM)
		}
	}
	if key, _, err := keys.Open(h, row.Body.KeyPEM); err != nil || key != sa.TLS.Certificates[0].KeyPEM {
		t.Fatalf("the row's sealed key does not open to the served one: %v", err)
	}
}

// A renewal that fails keeps the old material loaded and records the
// failure with a backoff; the next attempt after it succeeds.
func TestRenewalFailureKeepsOldMaterial(t *testing.T) {
	r := &responder{}
	port := startResponder(t, r)
	p := startPebble(t, port, 15) // renew 10 s in
	st := newMemStore("m-a")
	a := newManager(t, p, st, "m-a", func(c *Config) { c.MinBackoff = 3 * time.Second })
	r.managers = []*Manager{a}
	const h = "renew.example.test"
	a.Want([]string{h})
	var first store.Row[store.CertificateBody]
	waitFor(t, 30*time.Second, "first issuance", func() error {
		row, ok := st.row(h)
		if !ok || row.Body.CertPEM == "" {
			return fmt.Errorf("%+v", row.Body)
		}
		first = row
		return nil
	})
	r.refuse.Store(true)
	// A renewal that passed its challenge before the refusal may still be
	// storing its material (on a loaded host the first poll can also come
	// a renewal late): the material to keep is what the row holds once
	// nothing can succeed any more.
	time.Sleep(2 * time.Second)
	first, _ = st.row(h)
	waitFor(t, 30*time.Second, "a failed renewal", func() error {
		row, _ := st.row(h)
		if row.Body.Failures == 0 {
			return fmt.Errorf("%+v", stateOf(a, h))
		}
		return nil
	})
	row, _ := st.row(h)
	if row.Body.CertPEM != first.Body.CertPEM || row.Body.KeyPEM != first.Body.KeyPEM || row.Body.LastError == "" ||
		row.Body.NextAttemptAt <= time.Now().Unix()-1 || row.Body.Challenge != nil {
		t.Fatalf("after a failed renewal the row is %+v", row.Body)
	}
	waitFor(t, 2*time.Second, "status reports the failure with the old material", func() error {
		s := stateOf(a, h)
		snap := a.Snapshot()
		if s.State != ingress.CertIssued || s.Error == "" || s.NextAttemptAt == 0 || len(snap.TLS.Certificates) != 1 ||
			snap.TLS.Certificates[0].CertPEM != first.Body.CertPEM {
			return fmt.Errorf("%+v", s)
		}
		return nil
	})
	t.Logf("failed renewal: %s", row.Body.LastError)
	r.refuse.Store(false)
	waitFor(t, 30*time.Second, "renewal after the backoff", func() error {
		row, _ := st.row(h)
		if row.Body.CertPEM == first.Body.CertPEM || row.Body.Failures != 0 || row.Body.LastError != "" {
			return fmt.Errorf("failures %d, same material %t", row.Body.Failures, row.Body.CertPEM == first.Body.CertPEM)
		}
		return nil
	})
	l1, _ := leafOf(t, first.Body.CertPEM)
	row, _ = st.row(h)
	l2, _ := leafOf(t, row.Body.CertPEM)
	if l1.SerialNumber.Cmp(l2.SerialNumber) == 0 {
		t.Fatal("renewed certificate has the old serial")
	}
}

// A CA that refuses leaves the hostname failed with the error, no
// material, and the next attempt after the backoff.
func TestIssuanceFailureIsReported(t *testing.T) {
	r := &responder{}
	r.refuse.Store(true)
	port := startResponder(t, r)
	p := startPebble(t, port, 0)
	st := newMemStore("m-a")
	a := newManager(t, p, st, "m-a", nil)
	const h = "nope.example.test"
	a.Want([]string{h})
	waitFor(t, 30*time.Second, "a failed issuance", func() error {
		if s := stateOf(a, h); s.State != ingress.CertFailed || s.Error == "" {
			return fmt.Errorf("%+v", s)
		}
		return nil
	})
	row, _ := st.row(h)
	if row.Body.CertPEM != "" || row.Body.Failures != 1 || row.Body.Issuer != "m-a" ||
		time.Until(time.Unix(row.Body.NextAttemptAt, 0)) < 50*time.Second {
		t.Fatalf("row %+v", row.Body)
	}
}
