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

	"github.com/ployz/ployz/sdk/store"
)

// issue runs one issuance of hostname's certificate and records the
// outcome in its row: the material, or the failure with the next attempt
// (keeping the old material). A failed hostname check writes nothing: it
// is this Machine's own evidence and only delays this Machine.
func (m *Manager) issue(ctx context.Context, hostname string, prev store.Row[store.CertificateBody], ms []string) {
	defer func() {
		m.mu.Lock()
		m.issuing = ""
		m.mu.Unlock()
		m.poke()
	}()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.IssueTimeout)
	defer cancel()
	start := m.cfg.Now()
	if err := m.cfg.Verify(ctx, hostname, ms); err != nil {
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
	m.log.Info("certificate: issuing", "hostname", hostname, "directory", m.cfg.Directory, "renewal", prev.Body.CertPEM != "")
	mat, err := m.obtain(ctx, hostname, prev)
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

// obtain orders a certificate for hostname, answering HTTP-01 through
// the row: the challenge is written, every proxy answers it, the CA
// validates, the order is finalized with a fresh P-256 key.
func (m *Manager) obtain(ctx context.Context, hostname string, prev store.Row[store.CertificateBody]) (*material, error) {
	cl, err := m.client(ctx)
	if err != nil {
		return nil, err
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
		var chal *xacme.Challenge
		for _, c := range z.Challenges {
			if c.Type == "http-01" {
				chal = c
			}
		}
		if chal == nil {
			return nil, fmt.Errorf("authorization for %s offers no http-01 challenge", hostname)
		}
		keyAuth, err := cl.HTTP01ChallengeResponse(chal.Token)
		if err != nil {
			return nil, fmt.Errorf("http-01 key authorization: %w", err)
		}
		b := prev.Body
		if _, err := parseMaterial(hostname, b); err != nil {
			b.CertPEM, b.KeyPEM, b.NotAfter, b.NotBefore = "", "", 0, 0
		}
		b.Challenge = &store.CertificateChallenge{Token: chal.Token, KeyAuthorization: keyAuth}
		b.Issuer = m.cfg.Machine
		if len(b.Domains) == 0 {
			b.Domains = []string{hostname}
		}
		if err := m.cfg.Store.PutCertificate(ctx, store.Row[store.CertificateBody]{Key: hostname, Owner: m.cfg.Machine, Body: b}); err != nil {
			return nil, fmt.Errorf("write the challenge: %w", err)
		}
		m.poke()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(m.cfg.ChallengeGrace):
		}
		if _, err := cl.Accept(ctx, chal); err != nil {
			return nil, fmt.Errorf("accept http-01: %w", err)
		}
		if _, err := cl.WaitAuthorization(ctx, z.URI); err != nil {
			return nil, fmt.Errorf("http-01 validation: %w", err)
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
		Subject: pkix.Name{CommonName: hostname}, DNSNames: []string{hostname}}, key)
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
