package acme

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/plugins/ingress-caddy/acmetest"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// startDNS01 runs a real BIND for zone example.test and Pebble
// validating against it.
func startDNS01(t *testing.T) (*acmetest.BIND, *acmetest.Pebble) {
	t.Helper()
	if testing.Short() {
		prereq.Skip(t, "-short: runs BIND and builds and runs Pebble")
	}
	b := acmetest.StartBIND(t, "example.test")
	return b, acmetest.Start(t, acmetest.Options{BinDir: pebbleBin, DNSServer: b.Addr})
}

// putDNSProvider writes a DNS provider row as `ployz cert dns-provider
// set` does: settings plain, the TSIG secret sealed with the Cluster key.
func putDNSProvider(t *testing.T, st *memStore, keys *Sealer, name string, b *acmetest.BIND, secret string) {
	t.Helper()
	row := ingress.DNSProviderRow(name)
	raw, _ := json.Marshal(map[string]string{"tsig_secret": secret})
	sealed, err := keys.dns.Seal(row, raw)
	if err != nil {
		t.Fatal(err)
	}
	st.PutCertificate(t.Context(), store.Row[store.CertificateBody]{Key: row, Owner: "m-a", Body: store.CertificateBody{ // memStore
		Source: ingress.CertSourceDNSProvider, AddedAt: time.Now().Unix(),
		DNSProvider: &store.DNSProviderBody{Provider: "rfc2136", Zone: b.Zone, Secrets: sealed,
			Settings: map[string]string{"server": b.Addr, "tsig_key": b.KeyName, "tsig_algorithm": b.Algorithm}}}})
}

// A wildcard and a plain name in a provider's zone are issued through
// real DNS-01: the issuer adds the _acme-challenge TXT record in a real
// BIND with a TSIG-signed update, Pebble validates by asking that BIND,
// the record is removed afterwards. The hostname check (HTTP-01's
// /.ployz-verify) is not asked: it fails here, as behind a firewall. The
// second Machine serves both from the shared rows, the wildcard
// certificate for the wildcard route.
func TestDNS01WildcardAndPlainName(t *testing.T) {
	bind, p := startDNS01(t)
	st := newMemStore("m-a", "m-b")
	keys := testSealer(t, 1)
	putDNSProvider(t, st, keys, "lab", bind, bind.Secret)
	unreachable := func(c *Config) {
		c.Keys = keys
		c.Verify = func(_ context.Context, h string, _ []string) error {
			return fmt.Errorf("%s does not reach this Cluster", h)
		}
		c.PropagationInterval = 100 * time.Millisecond
	}
	a := newManager(t, p, st, "m-a", unreachable)
	b := newManager(t, p, st, "m-b", unreachable)
	hosts := []string{"*.example.test", "www.example.test"}
	a.Want(hosts)
	b.Want(hosts)
	roots := p.Roots(t)
	for _, h := range hosts {
		waitFor(t, 90*time.Second, h+" issued", func() error {
			r, ok := st.row(h)
			if !ok || r.Body.CertPEM == "" {
				return fmt.Errorf("no material yet; state %+v; row %+v", stateOf(a, h), r.Body)
			}
			return nil
		})
		r, _ := st.row(h)
		if r.Body.Challenge != nil || r.Body.Failures != 0 {
			t.Errorf("%s: row after issuance %+v", h, r.Body)
		}
		opened, _, err := keys.Open(h, r.Body.KeyPEM)
		if err != nil || !strings.Contains(opened, "PRIVATE KEY") {
			t.Errorf("%s: key_pem not sealed with the Cluster key: %v", h, err)
		}
		leaf, inter := leafOf(t, r.Body.CertPEM)
		if !slices.Equal(leaf.DNSNames, []string{h}) {
			t.Errorf("%s: certificate names %v", h, leaf.DNSNames)
		}
		serve := strings.Replace(h, "*", "shop", 1) // a name the wildcard serves
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: serve, Roots: roots, Intermediates: inter}); err != nil {
			t.Errorf("%s: does not verify for %s against Pebble's root: %v", h, serve, err)
		}
		if st := stateOf(a, h); !strings.Contains(st.Detail, `dns-01 via DNS provider "lab"`) {
			t.Errorf("%s: state %+v does not say dns-01", h, st)
		}
	}
	if n := p.Issued(); n != 2 {
		t.Errorf("pebble issued %d certificates, want 2 (one per name for the Cluster)", n)
	}
	for _, name := range []string{"_acme-challenge.example.test", "_acme-challenge.www.example.test"} {
		if txt := bind.TXT(t, name); len(txt) != 0 {
			t.Errorf("%s still holds TXT %q after issuance", name, txt)
		}
	}
	if n := strings.Count(bind.Log(), "adding an RR at"); n < 2 {
		t.Errorf("BIND logged %d record additions, want the two challenges:\n%s", n, bind.Log())
	}
	waitFor(t, 10*time.Second, "m-b serves both", func() error {
		var served []string
		for _, c := range b.Snapshot().TLS.Certificates {
			served = append(served, c.Hostname)
		}
		slices.Sort(served)
		if !slices.Equal(served, hosts) {
			return fmt.Errorf("m-b serves %v", served)
		}
		return nil
	})
}

// A wrong TSIG secret: BIND refuses the update, the failure names the
// provider in the row and in the state the operator sees, the next
// attempt backs off, the old certificate is still served and nothing is
// left in the zone.
func TestDNS01BadSecretBacksOffKeepingMaterial(t *testing.T) {
	bind, p := startDNS01(t)
	st := newMemStore("m-a")
	keys := testSealer(t, 1)
	putDNSProvider(t, st, keys, "lab", bind, "d3Jvbmcgc2VjcmV0IGZvciB0aGUgdGVzdHM=")
	const h = "www.example.test"
	now := time.Now()
	oldCert, oldKey := selfSigned(t, now.Add(-2*time.Hour), now.Add(time.Hour), h)        // past two thirds: renew
	st.PutCertificate(t.Context(), store.Row[store.CertificateBody]{Key: h, Owner: "m-a", // memStore
		Body: store.CertificateBody{Domains: []string{h}, CertPEM: oldCert, KeyPEM: oldKey, Issuer: "m-a"}})
	m := newManager(t, p, st, "m-a", func(c *Config) { c.Keys = keys; c.MinBackoff = time.Minute })
	m.Want([]string{h})
	waitFor(t, 60*time.Second, "the failure recorded", func() error {
		if r, _ := st.row(h); r.Body.Failures == 0 {
			return fmt.Errorf("no failure yet: %+v", stateOf(m, h))
		}
		return nil
	})
	r, _ := st.row(h)
	for _, want := range []string{`DNS provider "lab"`, "rfc2136", "refused", "TSIG"} {
		if !strings.Contains(r.Body.LastError, want) {
			t.Errorf("last_error %q does not say %q", r.Body.LastError, want)
		}
	}
	if next := time.Unix(r.Body.NextAttemptAt, 0); next.Before(now.Add(55*time.Second)) || next.After(time.Now().Add(61*time.Second)) {
		t.Errorf("next attempt at %s, want about a minute after the failure", next)
	}
	opened, _, _ := keys.Open(h, r.Body.KeyPEM)
	if r.Body.CertPEM != oldCert || opened != oldKey {
		t.Error("the old material was not kept")
	}
	time.Sleep(time.Second) // a few polls: the backoff holds
	if r2, _ := st.row(h); r2.Body.Failures != 1 {
		t.Errorf("failures %d within the backoff, want 1", r2.Body.Failures)
	}
	s := stateOf(m, h)
	if s.State != ingress.CertIssued || !strings.Contains(s.Error, `DNS provider "lab"`) || s.NextAttemptAt == 0 {
		t.Errorf("state %+v: want the old certificate served, the reason and the next attempt", s)
	}
	if c := m.Snapshot().TLS.Certificates; len(c) != 1 || c[0].CertPEM != oldCert {
		t.Errorf("served %+v, want the old certificate", c)
	}
	if p.Issued() != 0 {
		t.Errorf("pebble issued %d", p.Issued())
	}
	if txt := bind.TXT(t, "_acme-challenge."+h); len(txt) != 0 {
		t.Errorf("TXT %q left in the zone", txt)
	}
	if !strings.Contains(bind.Log(), "BADSIG") && !strings.Contains(bind.Log(), "bad signature") {
		t.Logf("BIND log (no BADSIG line):\n%s", bind.Log())
	}
}

// The choice: a name a provider's zone covers (its wildcard too) is
// issued with DNS-01, others with HTTP-01, a wildcard outside every zone
// gets nothing; a provider row this Machine cannot open is skipped with
// the reason, and its names fall back to HTTP-01.
func TestDNS01Choice(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := newMemStore("m-a")
	keys := testSealer(t, 1)
	putDNSProvider(t, st, keys, "lab", &acmetest.BIND{Zone: "example.test.", Addr: "127.0.0.1:53", KeyName: "k.", Algorithm: "hmac-sha256"}, "c2VjcmV0")
	m, err := New(Config{Machine: "m-a", Directory: "https://ca.invalid/dir", Store: st, Keys: keys, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := st.Certificates(t.Context())
	for _, h := range []string{"*.example.test", "a.example.test", "b.other.test", "*.other.test"} {
		m.Want([]string{h})
		j := m.evaluate(rows, []string{"m-a"})
		m.issuing = ""
		switch {
		case h == "*.other.test":
			if j.hostname != "" || len(m.Snapshot().States) != 0 {
				t.Errorf("%s: job %+v states %+v, want nothing", h, j, m.Snapshot().States)
			}
		case strings.HasSuffix(h, "example.test"):
			if j.hostname != h || j.dns == nil || j.dns.Name != "lab" || j.dns.Secrets["tsig_secret"] != "c2VjcmV0" || j.challengeType() != "dns-01" {
				t.Errorf("%s: job %+v, want dns-01 through lab with its opened secret", h, j)
			}
		default:
			if j.hostname != h || j.dns != nil {
				t.Errorf("%s: job %+v, want http-01", h, j)
			}
		}
	}
	if sk := m.Snapshot().Skipped; len(sk) != 0 {
		t.Errorf("skipped %+v", sk)
	}

	other, _ := New(Config{Machine: "m-a", Directory: "https://ca.invalid/dir", Store: st, Keys: testSealer(t, 2), Now: func() time.Time { return now }})
	other.Want([]string{"*.example.test", "a.example.test"})
	j := other.evaluate(rows, []string{"m-a"})
	if j.hostname != "a.example.test" || j.dns != nil {
		t.Errorf("with another Cluster's key: job %+v, want a.example.test on http-01", j)
	}
	if sk := other.Snapshot().Skipped; len(sk) != 1 || sk[0].Name != "dns-provider:lab" || !strings.Contains(sk[0].Reason, "another Cluster") {
		t.Errorf("skipped %+v, want the provider row with the reason", sk)
	}
}
