package dns

import (
	"bytes"
	"strings"
	"testing"

	miekg "github.com/miekg/dns"
)

func TestLookupQuestion(t *testing.T) {
	m, err := lookupQuestion("ptr", "10.210.1.5")
	if err != nil {
		t.Fatal(err)
	}
	if q := m.Question[0]; q.Name != "5.1.210.10.in-addr.arpa." || q.Qtype != miekg.TypePTR {
		t.Fatalf("PTR question %v", q)
	}
	if m, _ := lookupQuestion("A", "api.demo.internal"); m.Question[0].Name != "api.demo.internal." || m.Question[0].Qtype != miekg.TypeA {
		t.Fatalf("A question %v", m.Question[0])
	}
	for _, bad := range [][2]string{{"BOGUS", "x"}, {"PTR", "not-an-ip"}} {
		if _, err := lookupQuestion(bad[0], bad[1]); err == nil || !strings.Contains(err.Error(), "--type") {
			t.Fatalf("%v: %v, want an error naming --type", bad, err)
		}
	}
}

func TestLookupRefusesBadTypeWithUsage(t *testing.T) {
	var out, errw bytes.Buffer
	if code := lookup([]string{"--server", "127.0.0.1:1", "--type", "NOPE", "x"}, &out, &errw); code != 2 || !strings.Contains(errw.String(), "NOPE") {
		t.Fatalf("exit %d, stderr %q", code, errw.String())
	}
}
