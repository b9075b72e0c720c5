package render

import (
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/rpc"
)

// TestCertificateTables: cert ls and dns-provider ls share one table
// shape (empty message, header, "-" for unset cells and times); add and
// set print their one row and then their notes; secrets are only named.
func TestCertificateTables(t *testing.T) {
	var b strings.Builder
	if err := Certificates(&b, client.Certificates{}); err != nil || b.String() != "no certificates\n" {
		t.Fatalf("empty: %q %v", b.String(), err)
	}
	b.Reset()
	at := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC).Unix()
	c := client.Certificate{CertificateView: rpc.CertificateView{ID: "ab12", Source: "user", Names: []string{"a.example", "b.example"}, NotAfter: at},
		Warning: "expires in 3 days", Notes: []string{"machine old does not serve it"}}
	if err := CertificateAdded(&b, c); err != nil {
		t.Fatal(err)
	}
	contains(t, "cert add", b.String(), "ID SOURCE NAMES ISSUER NOT AFTER WARNING\nab12 user a.example,b.example - 2027-01-02T03:04:05Z expires in 3 days\n",
		"note: machine old does not serve it\n")
	b.Reset()
	if err := Certificates(&b, client.Certificates{Certificates: []client.Certificate{{CertificateView: rpc.CertificateView{Source: "acme", Names: []string{"c.example"}}}}}); err != nil {
		t.Fatal(err)
	}
	contains(t, "cert ls", b.String(), "- acme c.example - - \n")

	b.Reset()
	if err := DNSProviders(&b, client.DNSProviders{}); err != nil || b.String() != "no DNS providers (ployz cert dns-provider set)\n" {
		t.Fatalf("empty: %q %v", b.String(), err)
	}
	b.Reset()
	p := client.DNSProvider{DNSProviderView: rpc.DNSProviderView{Name: "bind", Provider: "rfc2136", Zone: "example.com.",
		Settings: map[string]string{"tsig_key": "k", "server": "ns1"}, Secrets: []string{"tsig_secret"}, AddedAt: at},
		Notes: []string{"machine old does not use DNS providers"}}
	if err := DNSProviderSet(&b, p); err != nil {
		t.Fatal(err)
	}
	contains(t, "dns-provider set", b.String(), "NAME PROVIDER ZONE SETTINGS ADDED\nbind rfc2136 example.com. server=ns1 tsig_key=k tsig_secret=(sealed) 2027-01-02T03:04:05Z\n",
		"note: machine old does not use DNS providers\n")
}
