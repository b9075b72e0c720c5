package acme

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/dns01"
	"github.com/ployz/ployz/sdk/store"
)

// issue runs one issuance of hostname's certificate and records the
// outcome in its row: the material, or the failure with the next attempt
// (keeping the old material). A failed hostname check writes nothing: it
// is this Machine's own evidence and only delays this Machine. DNS-01
// skips the check: the CA asks DNS, not this Cluster.
func (m *Manager) issue(ctx context.Context, j job, ms []string) {
	hostname, prev := j.hostname, j.prev
	defer func() {
		m.mu.Lock()
		m.issuing = ""
		m.mu.Unlock()
		m.poke()
	}()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.IssueTimeout)
	defer cancel()
	start := m.cfg.Now()
	if err := m.verify(ctx, j, ms); err != nil {
		m.mu.Lock()
		lw := m.local[hostname]
		lw.failures++
		lw.err = err.Error()
		lw.until = start.Add(m.backoff(lw.failures))
		m.local[hostname] = lw
		m.mu.Unlock()
		m.log.Warn("certificate: hostname check failed; not ordering", "hostname", hostname, "error", err, "retry_at", lw.until.UTC().Format(time.RFC3339))
		return
	}
	m.mu.Lock()
	delete(m.local, hostname)
	m.mu.Unlock()
	m.log.Info("certificate: issuing", "hostname", hostname, "directory", m.cfg.Directory, "renewal", prev.Body.CertPEM != "",
		"challenge", j.challengeType())
	mat, err := m.obtain(ctx, j)
	if ctx.Err() != nil && err != nil && errors.Is(err, context.Canceled) {
		return // shutting down: the challenge goes stale and another turn comes
	}
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer wcancel()
	cur := m.currentRow(wctx, hostname, prev)
	b := cur.Body
	b.Challenge = nil
	if err != nil {
		b.Failures++
		b.LastError = err.Error()
		b.NextAttemptAt = m.cfg.Now().Add(m.backoff(b.Failures)).Unix()
		if b.CertPEM == "" {
			b.Issuer = m.cfg.Machine
		}
		m.log.Error("certificate: issuance failed; keeping the old material", "hostname", hostname, "error", err,
			"failures", b.Failures, "next_attempt", time.Unix(b.NextAttemptAt, 0).UTC().Format(time.RFC3339))
	} else {
		b = store.CertificateBody{Domains: []string{hostname}, CertPEM: mat.certPEM, KeyPEM: mat.keyPEM,
			NotBefore: mat.notBefore.Unix(), NotAfter: mat.notAfter.Unix(), Issuer: m.cfg.Machine}
		m.log.Info("certificate: issued", "hostname", hostname, "serial", mat.serial,
			"not_after", mat.notAfter.UTC().Format(time.RFC3339), "took", m.cfg.Now().Sub(start).Round(time.Millisecond))
	}
	if perr := m.cfg.Store.PutCertificate(wctx, store.Row[store.CertificateBody]{Key: hostname, Owner: m.cfg.Machine, Body: b}); perr != nil {
		m.log.Error("certificate: write the outcome", "hostname", hostname, "error", perr)
	}
}

// currentRow re-reads hostname's row so an outcome keeps the newest
// material; prev when the store does not answer.
func (m *Manager) currentRow(ctx context.Context, hostname string, prev store.Row[store.CertificateBody]) store.Row[store.CertificateBody] {
	rows, err := m.cfg.Store.Certificates(ctx)
	if err != nil {
		return prev
	}
	for _, r := range rows {
		if strings.EqualFold(r.Key, hostname) {
			if _, err := parseMaterial(hostname, r.Body); err != nil {
				r.Body.CertPEM, r.Body.KeyPEM, r.Body.NotAfter, r.Body.NotBefore = "", "", 0, 0
			}
			return r
		}
	}
	return prev
}

// verify is the hostname check before ordering: HTTP-01 only.
func (m *Manager) verify(ctx context.Context, j job, ms []string) error {
	if j.dns != nil {
		return nil
	}
	return m.cfg.Verify(ctx, j.hostname, ms)
}

// challengeType is the ACME challenge j answers.
func (j job) challengeType() string {
	if j.dns != nil {
		return "dns-01"
	}
	return "http-01"
}

// obtain orders a certificate for j's hostname, answers each
// authorization (authorize), and finalizes the order with a fresh P-256
// key.
func (m *Manager) obtain(ctx context.Context, j job) (*material, error) {
	hostname := j.hostname
	cl, err := m.client(ctx)
	if err != nil {
		return nil, err
	}
	var solver *dns01.Solver
	if j.dns != nil {
		if solver, err = dns01.New(*j.dns); err != nil {
			return nil, err
		}
	}
	order, err := cl.AuthorizeOrder(ctx, xacme.DomainIDs(hostname))
	if err != nil {
		return nil, fmt.Errorf("new order: %w", err)
	}
	for _, u := range order.AuthzURLs {
		z, err := cl.GetAuthorization(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("authorization: %w", err)
		}
		if z.Status == xacme.StatusValid {
			continue
		}
		if err := m.authorize(ctx, cl, j, z, solver); err != nil {
			return nil, err
		}
	}
	ready, err := cl.WaitOrder(ctx, order.URI)
	if err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	if ready.URI == "" {
		ready.URI = order.URI
	}
	if ready.FinalizeURL == "" {
		ready.FinalizeURL = order.FinalizeURL
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: hostname}, DNSNames: []string{hostname}}, key) // a wildcard as "*.example.com"
	if err != nil {
		return nil, err
	}
	ders, _, err := cl.CreateCertFromOrder(ctx, ready, csr, true)
	if err != nil {
		return nil, fmt.Errorf("finalize: %w", err)
	}
	var certPEM strings.Builder
	for _, d := range ders {
		pem.Encode(&certPEM, &pem.Block{Type: "CERTIFICATE", Bytes: d}) // a strings.Builder does not fail
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
	mat, err := parseMaterial(hostname, store.CertificateBody{CertPEM: certPEM.String(), KeyPEM: keyPEM})
	if err != nil {
		return nil, fmt.Errorf("the CA's certificate: %w", err)
	}
	if mat == nil {
		return nil, errors.New("the CA returned no certificate")
	}
	return mat, nil
}

// authorize answers one authorization with j's challenge type. The
// challenge is written into the row first, so the other Machines see
// the issuance in progress (and, for HTTP-01, every proxy answers it);
// for DNS-01 the TXT record is added through the provider, awaited on
// the zone's authoritative server, and removed once the CA decided.
func (m *Manager) authorize(ctx context.Context, cl *xacme.Client, j job, z *xacme.Authorization, solver *dns01.Solver) error {
	typ := j.challengeType()
	var chal *xacme.Challenge
	for _, c := range z.Challenges {
		if c.Type == typ {
			chal = c
		}
	}
	if chal == nil {
		return fmt.Errorf("authorization for %s offers no %s challenge", j.hostname, typ)
	}
	keyAuth, err := cl.HTTP01ChallengeResponse(chal.Token) // the key authorization, whatever the type
	if err != nil {
		return fmt.Errorf("%s key authorization: %w", typ, err)
	}
	rowType := ""
	if solver != nil {
		rowType = "dns-01"
	}
	if err := m.writeChallenge(ctx, j, &store.CertificateChallenge{Token: chal.Token, KeyAuthorization: keyAuth, Type: rowType}); err != nil {
		return err
	}
	if solver == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(m.cfg.ChallengeGrace):
		}
	} else {
		cleanup, err := m.presentDNS(ctx, cl, solver, z.Identifier.Value, chal.Token)
		if err != nil {
			return err
		}
		defer cleanup()
	}
	if _, err := cl.Accept(ctx, chal); err != nil {
		return fmt.Errorf("accept %s: %w", typ, err)
	}
	if _, err := cl.WaitAuthorization(ctx, z.URI); err != nil {
		return fmt.Errorf("%s validation: %w", typ, err)
	}
	return nil
}

// writeChallenge records ch in j's row, keeping its valid material.
func (m *Manager) writeChallenge(ctx context.Context, j job, ch *store.CertificateChallenge) error {
	b := j.prev.Body
	if _, err := parseMaterial(j.hostname, b); err != nil {
		b.CertPEM, b.KeyPEM, b.NotAfter, b.NotBefore = "", "", 0, 0
	}
	b.Challenge = ch
	b.Issuer = m.cfg.Machine
	if len(b.Domains) == 0 {
		b.Domains = []string{j.hostname}
	}
	if err := m.cfg.Store.PutCertificate(ctx, store.Row[store.CertificateBody]{Key: j.hostname, Owner: m.cfg.Machine, Body: b}); err != nil {
		return fmt.Errorf("write the challenge: %w", err)
	}
	m.poke()
	return nil
}

// presentDNS adds the _acme-challenge TXT record of domain (a wildcard's
// base) and waits until the zone's authoritative server answers it; the
// cleanup removes it (logged when it fails: a stale TXT record harms
// nothing but is noise in the zone).
func (m *Manager) presentDNS(ctx context.Context, cl *xacme.Client, solver *dns01.Solver, domain, token string) (func(), error) {
	value, err := cl.DNS01ChallengeRecord(token)
	if err != nil {
		return nil, fmt.Errorf("dns-01 record: %w", err)
	}
	fqdn := "_acme-challenge." + strings.TrimSuffix(domain, ".") + "."
	rec, err := solver.Present(ctx, fqdn, value)
	if err != nil {
		return nil, fmt.Errorf("dns-01: %w", err)
	}
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if err := solver.Clean(cctx, rec); err != nil {
			m.log.Warn("certificate: remove the dns-01 record", "record", fqdn, "error", err)
		} else {
			m.log.Debug("certificate: removed the dns-01 record", "record", fqdn)
		}
	}
	m.log.Info("certificate: dns-01 record added; waiting for the zone's authoritative server", "record", fqdn,
		"provider", solver.Config.Name, "servers", strings.Join(solver.Authoritative, ","))
	wctx, cancel := context.WithTimeout(ctx, m.cfg.PropagationTimeout)
	defer cancel()
	if err := dns01.WaitTXT(wctx, solver.Authoritative, fqdn, value, m.cfg.PropagationInterval); err != nil {
		cleanup()
		return nil, fmt.Errorf("dns-01 via %s: %w", solver, err)
	}
	return cleanup, nil
}
