package client

import (
	"strings"
	"testing"
	"time"
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
