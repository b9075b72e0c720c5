package client

import (
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
