package client

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// CertExpiryWarning is how close to its expiry a certificate is flagged
// by `ployz cert ls` and the dashboard.
const CertExpiryWarning = 21 * 24 * time.Hour

// Certificate is one certificate of the Cluster as operators see it (no
// key), with a warning when it expired or expires within
// CertExpiryWarning.
type Certificate struct {
	rpc.CertificateView
	Warning string `json:"warning,omitempty"`
	// Notes (cert add) name the ingress Machines that will not serve it.
	Notes []string `json:"notes,omitempty"`
}

// Certificates answers `ployz cert ls`.
type Certificates struct {
	Certificates []Certificate `json:"certificates"`
}

// CertExpiry is the warning for a certificate expiring at notAfter (unix
// seconds), seen at now: "" when it is further than CertExpiryWarning.
func CertExpiry(notAfter int64, now time.Time) string {
	if notAfter == 0 {
		return ""
	}
	at := time.Unix(notAfter, 0)
	switch left := at.Sub(now); {
	case left <= 0:
		return "expired " + at.UTC().Format(time.DateOnly)
	case left < CertExpiryWarning:
		return fmt.Sprintf("expires in %d days", int(left.Hours()/24))
	}
	return ""
}

// AddCertificateFiles reads a PEM chain (leaf first) and its private key
// and adds them as a user certificate (AddCertificate).
func (s *Session) AddCertificateFiles(ctx context.Context, certFile, keyFile string) (Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return Certificate{}, fmt.Errorf("cert: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return Certificate{}, fmt.Errorf("key: %w", err)
	}
	return s.AddCertificate(ctx, certPEM, keyPEM)
}

// AddCertificate checks a certificate and key here (refusing, naming
// "cert" or "key", one that does not parse, whose key is not the leaf's,
// that expired or names no DNS name) and has the entry store it: the key
// sealed with the Cluster key, served by every Machine's ingress for the
// names it covers, before any ACME certificate. Nothing is stored on a
// refusal.
func (s *Session) AddCertificate(ctx context.Context, certPEM, keyPEM []byte) (Certificate, error) {
	if _, err := ingress.CheckUserCertificate(certPEM, keyPEM, time.Now()); err != nil {
		return Certificate{}, fmt.Errorf("certificate refused: %w", err)
	}
	var v rpc.CertificateView
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.AddCertificate, rpc.AddCertificateRequest{CertPEM: string(certPEM), KeyPEM: string(keyPEM)}, &v)
	if err != nil {
		return Certificate{}, fmt.Errorf("add certificate: %w", err)
	}
	c := withExpiry(v, time.Now())
	if list, err := s.Machines(ctx); err == nil {
		c.Notes = userCertNotes(list.Machines)
	}
	return c, nil
}

// userCertNotes names the participating ingress Machines whose proxy does
// not advertise ingress.CapUserCerts (an older release, or HTTPS off):
// they will not serve a user certificate.
func userCertNotes(ms []rpc.MachineView) []string {
	var notes []string
	for _, m := range ms {
		if m.Phase != "participating" || !rpc.Accepts(m.Labels, rpc.AcceptIngress) || !slices.Contains(m.Capabilities, ingress.CapHTTP) {
			continue
		}
		if !slices.Contains(m.Capabilities, ingress.CapUserCerts) {
			notes = append(notes, fmt.Sprintf("machine %s does not serve user certificates (no %s: an older release, or HTTPS off there)", m.Name, ingress.CapUserCerts))
		}
	}
	return notes
}

// Certificates lists the Cluster's certificates, user and ACME, with
// their expiry warnings.
func (s *Session) Certificates(ctx context.Context) (Certificates, error) {
	var list rpc.CertificateList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListCertificates, rpc.None{}, &list); err != nil {
		return Certificates{}, fmt.Errorf("list certificates: %w", err)
	}
	now := time.Now()
	out := Certificates{Certificates: make([]Certificate, 0, len(list.Certificates))}
	for _, v := range list.Certificates {
		out.Certificates = append(out.Certificates, withExpiry(v, now))
	}
	return out, nil
}

// RemoveCertificate removes the user certificates whose id is name or
// that cover exactly name; their names go back to ACME.
func (s *Session) RemoveCertificate(ctx context.Context, name string) (Certificates, error) {
	if err := CheckCertificateRef(name); err != nil {
		return Certificates{}, err
	}
	var r rpc.CertificatesRemoved
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.RemoveCertificate, rpc.RemoveCertificateRequest{Name: name}, &r); err != nil {
		return Certificates{}, fmt.Errorf("remove certificate: %w", err)
	}
	out := Certificates{Certificates: make([]Certificate, 0, len(r.Removed))}
	for _, v := range r.Removed {
		out.Certificates = append(out.Certificates, withExpiry(v, time.Now()))
	}
	return out, nil
}

func withExpiry(v rpc.CertificateView, now time.Time) Certificate {
	return Certificate{CertificateView: v, Warning: CertExpiry(v.NotAfter, now)}
}

// CheckCertificateRef refuses, before the Cluster is asked, a name `ployz
// cert rm` cannot mean: a DNS provider's row name (dns-provider:NAME)
// shares the certificates table, and the entry would call it an ACME
// certificate; the error names the command that removes it.
func CheckCertificateRef(name string) error {
	provider, ok := rpc.DNSProviderRef(name)
	if !ok {
		return nil
	}
	return fmt.Errorf("certificate %q: names DNS provider %s, not a certificate; remove it with `ployz cert dns-provider rm %s`",
		name, provider, provider)
}
