package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

func TestCertExpiry(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{now.Add(30 * 24 * time.Hour), ""},
		{now.Add(20*24*time.Hour + time.Hour), "expires in 20 days"},
		{now.Add(-time.Hour), "expired 2026-12-06"},
	} {
		if got := CertExpiry(tc.in.Unix(), now); got != tc.want {
			t.Errorf("CertExpiry(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if CertExpiry(0, now) != "" {
		t.Error("no expiry warned")
	}
}

// A refused pair never reaches the entry: the Session has none here.
func TestAddCertificateRefusesBeforeSending(t *testing.T) {
	_, err := (&Session{}).AddCertificate(t.Context(), []byte("nope"), []byte("nope"))
	if err == nil || !strings.Contains(err.Error(), "cert: no PEM CERTIFICATE block") {
		t.Fatalf("error %v", err)
	}
}

func TestUserCertNotes(t *testing.T) {
	ing := map[string]string{"ployz.accepts": "ingress"}
	ms := []rpc.MachineView{
		{Name: "new", Phase: "participating", Labels: ing, Capabilities: []string{ingress.CapHTTP, ingress.CapUserCerts}},
		{Name: "old", Phase: "participating", Labels: ing, Capabilities: []string{ingress.CapHTTP}},
		{Name: "db", Phase: "participating", Labels: map[string]string{"ployz.accepts": "services"}, Capabilities: []string{ingress.CapHTTP}},
	}
	if n := userCertNotes(ms); len(n) != 1 || !strings.Contains(n[0], "machine old ") {
		t.Fatalf("notes %v", n)
	}
}

// TestRemoveCertificateRefusesDNSProvider: `cert rm dns-provider:x` is
// refused before the entry is asked (the Session has none here), naming
// the command that removes a DNS provider; other names pass the check.
func TestRemoveCertificateRefusesDNSProvider(t *testing.T) {
	for _, name := range []string{"dns-provider:x", "DNS-Provider:x"} {
		_, err := (&Session{}).RemoveCertificate(t.Context(), name)
		if err == nil || !strings.Contains(err.Error(), "not a certificate; remove it with `ployz cert dns-provider rm x`") {
			t.Fatalf("%s: error %v", name, err)
		}
	}
	for _, name := range []string{"example.com", "user:ab12", "dns-provider"} {
		if err := CheckCertificateRef(name); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
}

// TestDNSProviderInput: the flags become a request without the settings
// not given; a secret both inline and in a file, or an empty file, is
// refused naming the flags; the check runs before any Cluster is asked.
func TestDNSProviderInput(t *testing.T) {
	in := DNSProviderInput{Provider: "rfc2136", Zone: "example.com.", Server: "ns1", TSIGKey: "k", TSIGSecret: "c2VjcmV0"}
	req, err := in.Request("bind")
	if err != nil || req.Name != "bind" || len(req.Settings) != 2 || req.Settings["server"] != "ns1" || req.Secrets["tsig_secret"] != "c2VjcmV0" {
		t.Fatalf("request %+v, %v", req, err)
	}
	file := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(file, []byte("c2VjcmV0\n"), 0o600)
	in.TSIGSecretFile = file
	if _, err := in.Request("bind"); err == nil || !strings.Contains(err.Error(), "--tsig-secret and --tsig-secret-file: give one") {
		t.Fatalf("both: %v", err)
	}
	in.TSIGSecret = ""
	if req, err := in.Request("bind"); err != nil || req.Secrets["tsig_secret"] != "c2VjcmV0" {
		t.Fatalf("from file: %+v %v", req, err)
	}
	os.WriteFile(file, nil, 0o600)
	if _, err := in.Request("bind"); err == nil || !strings.Contains(err.Error(), "--tsig-secret-file: "+file+" is empty") {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := (DNSProviderInput{Provider: "rfc2136"}).Request("bind"); err == nil || !strings.Contains(err.Error(), "DNS provider refused") {
		t.Fatalf("unchecked: %v", err)
	}
}
