package dashboard

import (
	"testing"

	"github.com/ployz/ployz/sdk/ingress"
)

func TestSummarizeCerts(t *testing.T) {
	issued := func(at int64) []ingress.CertificateState {
		return []ingress.CertificateState{{Hostname: "web.example.com", State: ingress.CertIssued, NotAfter: at}}
	}
	for _, c := range []struct {
		name     string
		ms       []MachineCerts
		state    string
		notAfter int64
		detail   string
	}{
		{"issued everywhere, earliest expiry", []MachineCerts{{Machine: "m1", HTTPS: true, Certs: issued(200)}, {Machine: "m2", HTTPS: true, Certs: issued(100)}},
			"issued", 100, ""},
		{"pending on one", []MachineCerts{{Machine: "m1", HTTPS: true, Certs: issued(200)}, {Machine: "m2", HTTPS: true}},
			"pending", 200, "pending on m2; issued on m1"},
		{"failed beats pending, error named", []MachineCerts{{Machine: "m1", HTTPS: true},
			{Machine: "m2", HTTPS: true, Certs: []ingress.CertificateState{{Hostname: "web.example.com", State: ingress.CertFailed, Error: "acme: rate limited"}}}},
			"failed", 0, "failed on m2; pending on m1; last error m2: acme: rate limited"},
		{"no answer named", []MachineCerts{{Machine: "m1", HTTPS: true, Certs: issued(200)}, {Machine: "m3", Error: "connection refused"}},
			"issued", 200, "issued on m1; no answer on m3"},
		{"https off", []MachineCerts{{Machine: "m1"}, {Machine: "m2"}}, "off", 0, ""},
		{"nobody answered", []MachineCerts{{Machine: "m1", Error: "x"}}, "unknown", 0, "no answer on m1"},
	} {
		got := SummarizeCerts("web.example.com", c.ms)
		if got.State != c.state || got.NotAfter != c.notAfter || got.Detail != c.detail {
			t.Errorf("%s: %+v, want %s %d %q", c.name, got, c.state, c.notAfter, c.detail)
		}
	}
}
