package acme

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	"github.com/ployz/ployz/sdk/store"
)

// material is a certificates row's usable certificate.
type material struct {
	certPEM, keyPEM     string
	notBefore, notAfter time.Time
	serial              string
}

// renewAt is two thirds into the material's lifetime.
func (m *material) renewAt() time.Time {
	return m.notBefore.Add(m.notAfter.Sub(m.notBefore) * 2 / 3)
}

// parseMaterial checks a row's material for hostname: a PEM leaf (then
// its chain) that covers hostname, and the matching private key. A row
// without cert_pem has no material (nil, nil); a malformed one is an
// error naming the field.
func parseMaterial(hostname string, b store.CertificateBody) (*material, error) {
	if strings.TrimSpace(b.CertPEM) == "" {
		if strings.TrimSpace(b.KeyPEM) != "" {
			return nil, fmt.Errorf(`field "cert_pem" is empty but "key_pem" is set`)
		}
		return nil, nil
	}
	if strings.TrimSpace(b.KeyPEM) == "" {
		return nil, fmt.Errorf(`field "key_pem" is empty`)
	}
	if strings.HasPrefix(b.KeyPEM, "enc:") {
		return nil, fmt.Errorf(`row %q: field "key_pem" is sealed and this Machine did not open it `+
			`(sealed by another Cluster, tampered with, or no cluster_secret_file in the ingress spec; see the log)`, hostname)
	}
	blk, _ := pem.Decode([]byte(b.CertPEM))
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf(`field "cert_pem" holds no PEM CERTIFICATE block`)
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf(`field "cert_pem": %v`, err)
	}
	if _, err := tls.X509KeyPair([]byte(b.CertPEM), []byte(b.KeyPEM)); err != nil {
		return nil, fmt.Errorf(`field "key_pem" does not match "cert_pem": %v`, err)
	}
	if err := coversName(leaf, hostname); err != nil {
		return nil, fmt.Errorf(`field "cert_pem" does not cover %s: %v`, hostname, err)
	}
	return &material{certPEM: b.CertPEM, keyPEM: b.KeyPEM, notBefore: leaf.NotBefore,
		notAfter: leaf.NotAfter, serial: leaf.SerialNumber.Text(16)}, nil
}

// coversName checks the leaf serves hostname: a wildcard hostname only
// by the same wildcard name (VerifyHostname takes no wildcard input).
func coversName(leaf *x509.Certificate, hostname string) error {
	if !strings.HasPrefix(hostname, "*.") {
		return leaf.VerifyHostname(hostname)
	}
	for _, n := range leaf.DNSNames {
		if strings.EqualFold(strings.TrimSuffix(n, "."), hostname) {
			return nil
		}
	}
	return fmt.Errorf("the certificate names %s, not %s", strings.Join(leaf.DNSNames, ", "), hostname)
}

// parseChallenge checks a row's challenge: nil when none, an error naming
// the field when it is incomplete or not a token.
func parseChallenge(b store.CertificateBody) (*store.CertificateChallenge, error) {
	c := b.Challenge
	if c == nil {
		return nil, nil
	}
	if c.Type != "" && c.Type != "dns-01" {
		return nil, fmt.Errorf(`field "challenge.type" is %q; this Machine knows http-01 (empty) and dns-01`, c.Type)
	}
	if c.Token == "" || c.KeyAuthorization == "" {
		return nil, fmt.Errorf(`field "challenge" lacks "token" or "key_authorization"`)
	}
	for _, r := range c.Token {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return nil, fmt.Errorf(`field "challenge.token" is not base64url`)
		}
	}
	if !strings.HasPrefix(c.KeyAuthorization, c.Token+".") {
		return nil, fmt.Errorf(`field "challenge.key_authorization" does not start with the token`)
	}
	return c, nil
}
