package ingress

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// User certificates are brought by the operator (`ployz cert add`) and
// kept in the certificates table beside the ACME ones, under a row name
// that is never a hostname, so an ACME reader never takes one for a name
// it issues.
const (
	// CertSourceUser marks a certificates row an operator brought; rows
	// without a source are ACME's.
	CertSourceUser = "user"
	// UserCertPrefix starts a user certificate's row name; the rest is its
	// id (UserCertID).
	UserCertPrefix = "user:"
	// CapUserCerts: serves user certificates (certificates rows whose
	// source is "user") for the names they cover, in preference to ACME.
	CapUserCerts = "ployz.ingress.user-certs.v1"
)

// UserCertificate is a parsed certificate and key pair: the PEM as
// given, the leaf's names and validity.
type UserCertificate struct {
	// ID is the first 12 hex digits of the leaf's SHA-256 (UserCertID).
	ID string
	// Names are the leaf's DNS names (subject alternative names),
	// lower-cased, sorted; a wildcard keeps its "*.".
	Names []string
	// Issuer is the leaf's issuer distinguished name.
	Issuer              string
	NotBefore, NotAfter time.Time
	// CertPEM is the chain re-encoded, leaf first; KeyPEM the key's block.
	CertPEM, KeyPEM string
}

// ParseUserCertificate checks a PEM chain (leaf first) and its private
// key: both well-formed, the key the leaf's, the leaf naming at least one
// DNS name. An error names the field ("cert" or "key"). Expiry is not
// checked here (CheckUserCertificate does, for adding).
func ParseUserCertificate(certPEM, keyPEM []byte) (UserCertificate, error) {
	chain, leaf, err := parseChain(certPEM)
	if err != nil {
		return UserCertificate{}, err
	}
	keyBlock, priv, err := parsePrivateKey(keyPEM)
	if err != nil {
		return UserCertificate{}, err
	}
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(priv.Public()) {
		return UserCertificate{}, errors.New("key: does not match the certificate (the first block of cert must be the leaf whose key this is)")
	}
	names := make([]string, 0, len(leaf.DNSNames))
	for _, n := range leaf.DNSNames {
		names = append(names, strings.ToLower(strings.TrimSuffix(n, ".")))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return UserCertificate{}, errors.New("cert: the leaf names no DNS name (subject alternative names); a common name alone is not served")
	}
	return UserCertificate{ID: UserCertID(leaf.Raw), Names: names, Issuer: leaf.Issuer.String(),
		NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter, CertPEM: chain,
		KeyPEM: string(pem.EncodeToMemory(keyBlock))}, nil
}

// CheckUserCertificate is ParseUserCertificate that also refuses a
// certificate expired at now: what `ployz cert add` accepts.
func CheckUserCertificate(certPEM, keyPEM []byte, now time.Time) (UserCertificate, error) {
	c, err := ParseUserCertificate(certPEM, keyPEM)
	if err != nil {
		return c, err
	}
	if !now.Before(c.NotAfter) {
		return UserCertificate{}, fmt.Errorf("cert: expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	return c, nil
}

// UserCertID names a certificate by its leaf's DER: 12 hex digits of
// its SHA-256, so adding the same certificate twice is one row.
func UserCertID(leafDER []byte) string {
	sum := sha256.Sum256(leafDER)
	return hex.EncodeToString(sum[:6])
}

// UserCertRow is the certificates row name of the user certificate id.
func UserCertRow(id string) string { return UserCertPrefix + id }

// Covers reports whether the certificate serves hostname: a name equal
// to it, or a wildcard name "*.d" for a hostname one label under d. A
// wildcard hostname is covered only by the same wildcard name.
func (c UserCertificate) Covers(hostname string) bool {
	h := strings.ToLower(strings.TrimSuffix(hostname, "."))
	for _, n := range c.Names {
		if n == h {
			return true
		}
		if suffix, ok := strings.CutPrefix(n, "*"); ok && !IsWildcard(h) {
			if label, ok := strings.CutSuffix(h, suffix); ok && label != "" && !strings.Contains(label, ".") {
				return true
			}
		}
	}
	return false
}

// parseChain reads every PEM block of cert: each a CERTIFICATE that
// parses. It returns the chain re-encoded and the leaf (the first).
func parseChain(certPEM []byte) (string, *x509.Certificate, error) {
	var out bytes.Buffer
	var leaf *x509.Certificate
	rest := certPEM
	for i := 1; ; i++ {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return "", nil, fmt.Errorf("cert: block %d is %q, want CERTIFICATE (the key goes in key)", i, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return "", nil, fmt.Errorf("cert: block %d: %v", i, err)
		}
		if leaf == nil {
			leaf = c
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes})
	}
	if leaf == nil {
		return "", nil, errors.New("cert: no PEM CERTIFICATE block")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return "", nil, errors.New("cert: text after the last PEM block is not PEM")
	}
	return out.String(), leaf, nil
}

// parsePrivateKey reads key's one PEM private key block (PKCS#8,
// PKCS#1 RSA or SEC 1 EC).
func parsePrivateKey(keyPEM []byte) (*pem.Block, crypto.Signer, error) {
	blk, rest := pem.Decode(keyPEM)
	if blk == nil {
		return nil, nil, errors.New("key: no PEM block")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, nil, errors.New("key: more than one PEM block; give the private key alone")
	}
	var k any
	var err error
	switch blk.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		return nil, nil, fmt.Errorf("key: block is %q, want PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY", blk.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("key: %v", err)
	}
	switch s := k.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return blk, s.(crypto.Signer), nil
	}
	return nil, nil, fmt.Errorf("key: %T is not a supported key type", k)
}
