package acme

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/store"
)

// FuzzParseMaterial: a certificates row's PEM is untrusted input (any
// store writer). parseMaterial never panics, refuses naming the field,
// and what it accepts is a leaf that covers the hostname with its
// matching key, the row's bytes kept as they were.
func FuzzParseMaterial(f *testing.F) {
	cert, key := selfSigned(f, time.Unix(0, 0), time.Unix(1<<32, 0), "a.example", "*.b.example")
	f.Add("a.example", cert, key)
	f.Add("x.b.example", cert, key)
	f.Add("c.example", cert, key)
	f.Add("a.example", cert, "")
	f.Add("a.example", "", key)
	f.Add("a.example", cert, "enc:v1:AAAA")
	f.Add("a.example", strings.Replace(cert, "CERTIFICATE", "CERTIFICATE REQUEST", 2), key)
	f.Add("a.example", cert[:len(cert)/2], key)
	f.Add("a.example", cert, key[:len(key)/2])
	f.Fuzz(func(t *testing.T, host, certPEM, keyPEM string) {
		m, err := parseMaterial(host, store.CertificateBody{CertPEM: certPEM, KeyPEM: keyPEM})
		if err != nil {
			if !strings.Contains(err.Error(), `field "cert_pem"`) && !strings.Contains(err.Error(), `field "key_pem"`) {
				t.Fatalf("refusal names no field: %v", err)
			}
			return
		}
		if m == nil {
			if strings.TrimSpace(certPEM) != "" || strings.TrimSpace(keyPEM) != "" {
				t.Fatalf("material in the row, none returned")
			}
			return
		}
		if m.certPEM != certPEM || m.keyPEM != keyPEM || m.serial == "" || !m.notAfter.After(m.notBefore) && !m.notAfter.Equal(m.notBefore) {
			t.Fatalf("accepted material changed or incomplete: %+v", m)
		}
		blk, _ := pem.Decode([]byte(certPEM))
		leaf, err := x509.ParseCertificate(blk.Bytes)
		if err != nil || leaf.VerifyHostname(host) != nil {
			t.Fatalf("accepted a leaf that does not cover %q: %v", host, err)
		}
	})
}

// FuzzParseChallenge: a row's challenge is served on port 80 to anyone;
// parseChallenge refuses naming the field and accepts only a base64url
// token whose key authorization starts with it.
func FuzzParseChallenge(f *testing.F) {
	f.Add("tok_en-1", "tok_en-1.thumb")
	f.Add("", "x")
	f.Add("a/b", "a/b.c")
	f.Add("abc", "abd.c")
	f.Add("é", "é.x")
	f.Fuzz(func(t *testing.T, token, keyAuth string) {
		c, err := parseChallenge(store.CertificateBody{Challenge: &store.CertificateChallenge{Token: token, KeyAuthorization: keyAuth}})
		if err != nil {
			if !strings.Contains(err.Error(), `field "challenge`) {
				t.Fatalf("refusal names no field: %v", err)
			}
			return
		}
		if c.Token == "" || strings.Trim(c.Token, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" ||
			!strings.HasPrefix(c.KeyAuthorization, c.Token+".") {
			t.Fatalf("accepted challenge %+v", c)
		}
	})
}

// FuzzOpenSealed: a stored key_pem is untrusted. Open never panics; a
// value without "enc:" is plain text returned as is; a sealed one that
// does not open is refused naming the row and field; and whatever is
// sealed opens again for its own row (any case) and for no other row.
func FuzzOpenSealed(f *testing.F) {
	sec, err := store.ParseClusterSecret(strings.Repeat("a0", 32))
	if err != nil {
		f.Fatal(err)
	}
	s, err := NewSealer(sec)
	if err != nil {
		f.Fatal(err)
	}
	sealed, err := s.sealWith(make([]byte, 24), "a.example", "-----BEGIN EC PRIVATE KEY-----\n")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("a.example", sealed)
	f.Add("A.Example", sealed)
	f.Add("b.example", sealed)
	f.Add("a.example", "-----BEGIN EC PRIVATE KEY-----\n")
	f.Add("a.example", "enc:v2:AAAA")
	f.Add("a.example", "enc:v1:!!!")
	f.Add("a.example", "enc:v1:"+strings.Repeat("A", 52))
	f.Add("a.example", "enc:")
	f.Fuzz(func(t *testing.T, row, stored string) {
		pt, plain, err := s.Open(row, stored)
		switch {
		case !strings.HasPrefix(stored, "enc:"):
			if err != nil || !plain || pt != stored {
				t.Fatalf("plain value not returned as is: %q %v %v", pt, plain, err)
			}
		case err != nil:
			if !strings.Contains(err.Error(), `field "key_pem"`) || !strings.Contains(err.Error(), "row ") {
				t.Fatalf("refusal names no row and field: %v", err)
			}
		case plain:
			t.Fatal("a sealed value opened as plain text")
		}
		// Round trip: the fuzzed text sealed for row.
		enc, err := s.Seal(row, stored)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(enc, SealedPrefix) {
			t.Fatalf("sealed form %q", enc)
		}
		back, plain, err := s.Open(row, enc)
		if err != nil || plain || back != stored {
			t.Fatalf("sealed value did not open for its own row: %q %v %v", back, plain, err)
		}
		if ascii(row) { // row names are hostnames: their case does not matter
			if back, _, err := s.Open(strings.ToUpper(row), enc); err != nil || back != stored {
				t.Fatalf("sealed value did not open for its row in upper case: %v", err)
			}
		}
		if _, _, err := s.Open(row+"x", enc); err == nil {
			t.Fatal("a sealed key opened for another row")
		}
	})
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// TestFuzzCorpusReachesAcceptance keeps the fixed corpus honest: its
// material is accepted for its names, so the fuzzer starts on both paths.
func TestFuzzCorpusReachesAcceptance(t *testing.T) {
	b, err := os.ReadFile("testdata/fuzz/FuzzParseMaterial/valid-pkcs8")
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if s, ok := strings.CutPrefix(line, "string("); ok {
			v, err := strconv.Unquote(strings.TrimSuffix(s, ")"))
			if err != nil {
				t.Fatal(err)
			}
			vals = append(vals, v)
		}
	}
	for _, host := range []string{"a.example", "x.b.example"} {
		if m, err := parseMaterial(host, store.CertificateBody{CertPEM: vals[1], KeyPEM: vals[2]}); err != nil || m == nil {
			t.Fatalf("corpus material for %s: %v", host, err)
		}
	}
}
