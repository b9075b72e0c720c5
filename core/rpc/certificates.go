package rpc

import (
	"cmp"
	"strings"

	"github.com/ployz/ployz/sdk/ingress"
)

// Certificates an operator brings (`ployz cert add`): the operator
// library hands the PEM to its entry, which checks it again, seals the
// private key with the Cluster key (only Machines hold it) and writes the
// certificates row every Machine's ingress serves.
const (
	CmdAddCertificate     = "add_certificate"
	CapAddCertificate     = "ployz.operator.add_certificate.v1"
	CmdListCertificates   = "list_certificates"
	CapListCertificates   = "ployz.operator.list_certificates.v1"
	CmdRemoveCertificate  = "remove_certificate"
	CapRemoveCertificate  = "ployz.operator.remove_certificate.v1"
	maxCertificatePEMSize = 256 << 10
)

// AddCertificateRequest carries a PEM chain (leaf first) and its key.
type AddCertificateRequest struct {
	CertPEM string `json:"cert_pem"`
	KeyPEM  string `json:"key_pem"`
}

// CertificateView is one certificates row without its key: a user
// certificate (Source "user", ID set) or an ACME one (keyed by its name).
type CertificateView struct {
	ID        string   `json:"id,omitempty"`
	Source    string   `json:"source"`
	Names     []string `json:"names"`
	Issuer    string   `json:"issuer,omitempty"`
	NotBefore int64    `json:"not_before,omitempty"` // unix seconds
	NotAfter  int64    `json:"not_after,omitempty"`  // unix seconds
	AddedAt   int64    `json:"added_at,omitempty"`
	// Error is an ACME row's last failed attempt.
	Error string `json:"error,omitempty"`
}

// CertificateList answers list_certificates.
type CertificateList struct {
	Certificates []CertificateView `json:"certificates"`
}

// RemoveCertificateRequest names a user certificate by id or by one of
// its names.
type RemoveCertificateRequest struct {
	Name string `json:"name"`
}

// CertificatesRemoved answers remove_certificate.
type CertificatesRemoved struct {
	Removed []CertificateView `json:"removed"`
}

// Validate refuses a missing or oversized PEM, naming the field; the
// entry parses the rest.
func (r AddCertificateRequest) Validate() error {
	switch {
	case r.CertPEM == "" || len(r.CertPEM) > maxCertificatePEMSize:
		return InvalidField("cert_pem", "want a PEM chain of 1 to %d bytes", maxCertificatePEMSize)
	case r.KeyPEM == "" || len(r.KeyPEM) > maxCertificatePEMSize:
		return InvalidField("key_pem", "want a PEM private key of 1 to %d bytes", maxCertificatePEMSize)
	}
	return nil
}

// Validate refuses an empty name.
func (r RemoveCertificateRequest) Validate() error {
	if r.Name == "" || len(r.Name) > 253 {
		return InvalidField("name", "%q: want a certificate id or name", r.Name)
	}
	if provider, ok := DNSProviderRef(r.Name); ok {
		return InvalidField("name", "%q names DNS provider %s, not a certificate; remove it with `ployz cert dns-provider rm %s`", r.Name, provider, provider)
	}
	return nil
}

// DNSProviderRef reports whether name is a DNS provider's row name
// (dns-provider:NAME, any case), which shares the certificates table but
// is no certificate, and which provider it names ("NAME" when empty).
func DNSProviderRef(name string) (provider string, ok bool) {
	p := ingress.DNSProviderPrefix
	if len(name) < len(p) || !strings.EqualFold(name[:len(p)], p) {
		return "", false
	}
	return cmp.Or(name[len(p):], "NAME"), true
}
