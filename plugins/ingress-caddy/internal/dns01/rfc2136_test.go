package dns01

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/plugins/ingress-caddy/acmetest"
	"github.com/ployz/ployz/sdk/ingress"
)

// Against a real BIND: Present adds the TXT record with a TSIG-signed
// update, WaitTXT sees it on the authoritative server, Clean removes
// exactly it (another value at the same name stays); a wrong secret is
// refused naming the provider, and WaitTXT gives up naming the server.
func TestRFC2136AgainstBIND(t *testing.T) {
	if testing.Short() {
		prereq.Skip(t, "-short: runs BIND")
	}
	b := acmetest.StartBIND(t, "example.test")
	cfg := func(secret string) *Solver {
		p, err := ingress.CheckDNSProvider(ingress.DNSProvider{Name: "lab", Provider: "rfc2136", Zone: b.Zone,
			Settings: map[string]string{"server": b.Addr, "tsig_key": b.KeyName, "tsig_algorithm": b.Algorithm},
			Secrets:  map[string]string{"tsig_secret": secret}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := cfg(b.Secret)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const name = "_acme-challenge.www.example.test."
	long := strings.Repeat("v", 300) // more than one TXT string
	r1, err := s.Present(ctx, name, "value-one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Present(ctx, name, long); err != nil {
		t.Fatal(err)
	}
	if err := WaitTXT(ctx, s.Authoritative, name, long, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := s.Clean(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if got := b.TXT(t, name); !slices.Equal(got, []string{long}) {
		t.Fatalf("after removing one value: %q", got)
	}

	_, err = cfg("d3Jvbmcgc2VjcmV0").Present(ctx, "_acme-challenge.x.example.test.", "v")
	if err == nil || !strings.Contains(err.Error(), `DNS provider "lab"`) || !strings.Contains(err.Error(), "TSIG") {
		t.Fatalf("wrong secret: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer wcancel()
	if err := WaitTXT(wctx, s.Authoritative, "_acme-challenge.x.example.test.", "v", 50*time.Millisecond); err == nil ||
		!strings.Contains(err.Error(), b.Addr) {
		t.Fatalf("WaitTXT for a missing record: %v", err)
	}
}
