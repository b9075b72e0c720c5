package acme

import (
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// A user certificate serves the names it covers (a wildcard route too)
// and no ACME order is placed for them; once it expires ACME takes its
// names back; a name it does not cover is issued as before, and a
// wildcard no user certificate covers gets nothing.
func TestUserCertificatePreferredOverACME(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := newMemStore("m-a")
	certPEM, keyPEM := selfSigned(t, now.Add(-time.Hour), now.Add(24*time.Hour), "*.example.test", "example.test")
	u, err := ingress.ParseUserCertificate([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	st.certs[ingress.UserCertRow(u.ID)] = store.Row[store.CertificateBody]{Key: ingress.UserCertRow(u.ID),
		Body: store.CertificateBody{Source: ingress.CertSourceUser, CertPEM: certPEM, KeyPEM: keyPEM}}
	m := planManager(t, "m-a", &now, st)
	m.Want([]string{"a.example.test", "*.example.test", "*.other.test"})
	if due := evalNow(t, m, st); due != "" {
		t.Fatalf("ordered %s, which a user certificate covers", due)
	}
	snap := m.Snapshot()
	if len(snap.TLS.Certificates) != 2 || len(snap.States) != 2 || len(snap.Skipped) != 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	for _, s := range snap.States {
		if s.Source != ingress.CertSourceUser || s.State != ingress.CertIssued {
			t.Errorf("state %+v", s)
		}
	}
	m.Want([]string{"a.example.test", "b.other.test"})
	if due := evalNow(t, m, st); due != "b.other.test" {
		t.Fatalf("due %q, want the uncovered b.other.test", due)
	}
	now = now.Add(25 * time.Hour)
	m.Want([]string{"a.example.test"})
	if due := evalNow(t, m, st); due != "a.example.test" {
		t.Fatalf("due %q once the user certificate expired, want a.example.test", due)
	}
}
