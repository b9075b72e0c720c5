package rpc

import (
	"strings"
	"testing"
)

// TestRemoveCertificateRefusesDNSProvider: a DNS provider's row name is
// refused by every entry, naming the field and the command that removes
// it, so no caller (an older CLI, a script) hears of "an ACME certificate".
func TestRemoveCertificateRefusesDNSProvider(t *testing.T) {
	for _, name := range []string{"dns-provider:lab", "DNS-Provider:lab"} {
		err := RemoveCertificateRequest{Name: name}.Validate()
		if err == nil || !strings.Contains(err.Error(), "name: ") || !strings.Contains(err.Error(), "ployz cert dns-provider rm lab") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (RemoveCertificateRequest{Name: "dns-provider:"}).Validate(); err == nil || !strings.Contains(err.Error(), "dns-provider rm NAME") {
		t.Errorf("empty provider: %v", err)
	}
	for _, name := range []string{"shop.example.test", "cert-0123abcd", "dns-provider"} {
		if err := (RemoveCertificateRequest{Name: name}).Validate(); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
}
