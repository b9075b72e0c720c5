package ingress

import (
	"errors"
	"strings"
	"testing"
)

func goodProvider() DNSProvider {
	return DNSProvider{Name: "lab", Provider: "rfc2136", Zone: "Example.COM",
		Settings: map[string]string{"server": "[2001:db8::1]:5353", "tsig_key": "Ployz-Key"},
		Secrets:  map[string]string{"tsig_secret": "c2VjcmV0"}}
}

// A provider is normalised (zone and key fully qualified and lower-case,
// default algorithm, port kept); every refusal names the field and its
// flag and never repeats a secret.
func TestCheckDNSProvider(t *testing.T) {
	p, err := CheckDNSProvider(goodProvider())
	if err != nil {
		t.Fatal(err)
	}
	if p.Zone != "example.com." || p.Settings["tsig_key"] != "ployz-key." || p.Settings["tsig_algorithm"] != "hmac-sha256" ||
		p.Settings["server"] != "[2001:db8::1]:5353" || p.Secrets["tsig_secret"] != "c2VjcmV0" {
		t.Fatalf("normalised %+v", p)
	}
	if p, _ := CheckDNSProvider(DNSProvider{Name: "a", Provider: "rfc2136", Zone: "example.com.",
		Settings: map[string]string{"server": "ns1.example.com", "tsig_key": "k", "tsig_algorithm": "HMAC-SHA512."},
		Secrets:  map[string]string{"tsig_secret": "c2VjcmV0"}}); p.Settings["server"] != "ns1.example.com:53" || p.Settings["tsig_algorithm"] != "hmac-sha512" {
		t.Errorf("default port or algorithm case: %+v", p.Settings)
	}
	cases := []struct {
		field string
		mod   func(*DNSProvider)
	}{
		{"name", func(p *DNSProvider) { p.Name = "" }},
		{"name", func(p *DNSProvider) { p.Name = "Lab" }},
		{"provider", func(p *DNSProvider) { p.Provider = "cloudflare" }},
		{"zone", func(p *DNSProvider) { p.Zone = "" }},
		{"zone", func(p *DNSProvider) { p.Zone = "*.example.com" }},
		{"zone", func(p *DNSProvider) { p.Zone = "-a.example.com" }},
		{"server", func(p *DNSProvider) { delete(p.Settings, "server") }},
		{"server", func(p *DNSProvider) { p.Settings["server"] = "ns1:0" }},
		{"tsig_key", func(p *DNSProvider) { p.Settings["tsig_key"] = "a key" }},
		{"tsig_algorithm", func(p *DNSProvider) { p.Settings["tsig_algorithm"] = "hmac-md5" }},
		{"tsig_secret", func(p *DNSProvider) { p.Secrets["tsig_secret"] = "!!not base64!!" }},
		{"tsig_secret", func(p *DNSProvider) { delete(p.Secrets, "tsig_secret") }},
		{"token", func(p *DNSProvider) { p.Secrets["token"] = "x" }},
		{"region", func(p *DNSProvider) { p.Settings["region"] = "x" }},
	}
	for _, c := range cases {
		p := goodProvider()
		c.mod(&p)
		_, err := CheckDNSProvider(p)
		var fe *DNSProviderFieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: got %v", c.field, err)
			continue
		}
		if !strings.Contains(err.Error(), "--"+strings.ReplaceAll(c.field, "_", "-")) {
			t.Errorf("%v does not name the flag", err)
		}
		if strings.Contains(err.Error(), "!!not base64!!") {
			t.Errorf("%v repeats the secret", err)
		}
	}
}

// The longest zone covering a name wins; a wildcard is covered by its
// base's zone; a name outside every zone has none.
func TestDNSProviderFor(t *testing.T) {
	ps := []DNSProvider{{Name: "top", Zone: "example.com."}, {Name: "sub", Zone: "dev.example.com."}}
	for h, want := range map[string]string{
		"example.com": "top", "*.example.com": "top", "a.b.example.com": "top",
		"dev.example.com": "sub", "*.dev.example.com": "sub", "x.dev.example.com.": "sub",
		"example.org": "", "badexample.com": "", "*.com": "",
	} {
		p, ok := DNSProviderFor(ps, h)
		if got := map[bool]string{true: p.Name}[ok]; got != want {
			t.Errorf("%s: provider %q, want %q", h, got, want)
		}
	}
}
