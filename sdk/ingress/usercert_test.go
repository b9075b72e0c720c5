package ingress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// pair is a self-signed certificate for names valid in [from, to), and
// its key, in PEM.
func pair(t *testing.T, from, to time.Time, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "cn.test"}, DNSNames: names,
		NotBefore: from, NotAfter: to}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}

func TestCheckUserCertificateRefusals(t *testing.T) {
	now := time.Now()
	good, goodKey := pair(t, now.Add(-time.Hour), now.Add(90*24*time.Hour), "Example.com", "*.example.com")
	_, otherKey := pair(t, now.Add(-time.Hour), now.Add(time.Hour), "example.com")
	expired, expiredKey := pair(t, now.Add(-48*time.Hour), now.Add(-time.Hour), "example.com")
	nameless, namelessKey := pair(t, now.Add(-time.Hour), now.Add(time.Hour))
	for _, tc := range []struct {
		name      string
		cert, key []byte
		want      string // the refusal's start; "" accepts
	}{
		{"valid", good, goodKey, ""},
		{"key of another certificate", good, otherKey, "key: does not match"},
		{"expired", expired, expiredKey, "cert: expired at"},
		{"no names", nameless, namelessKey, "cert: the leaf names no DNS name"},
		{"cert not PEM", []byte("hello"), goodKey, "cert: no PEM CERTIFICATE block"},
		{"cert block corrupt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), goodKey, "cert: block 1:"},
		{"key given as cert", append(append([]byte{}, good...), goodKey...), goodKey, "cert: block 2 is \"PRIVATE KEY\""},
		{"text after the chain", append(append([]byte{}, good...), "junk"...), goodKey, "cert: text after"},
		{"key not PEM", good, []byte("nope"), "key: no PEM block"},
		{"key is a certificate", good, good, "key: block is \"CERTIFICATE\""},
		{"key block corrupt", good, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{9}}), "key: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CheckUserCertificate(tc.cert, tc.key, now)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.ID == "" || len(c.ID) != 12 || strings.Join(c.Names, ",") != "*.example.com,example.com" || c.Issuer != "CN=cn.test" {
					t.Fatalf("parsed %+v", c)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want one starting %q", err, tc.want)
			}
		})
	}
}

func TestUserCertificateCovers(t *testing.T) {
	c := UserCertificate{Names: []string{"*.example.com", "example.com"}}
	for h, want := range map[string]bool{
		"example.com": true, "a.example.com": true, "A.Example.com.": true, "*.example.com": true,
		"a.b.example.com": false, "other.com": false, "*.other.com": false, "xexample.com": false,
	} {
		if got := c.Covers(h); got != want {
			t.Errorf("Covers(%q) = %v, want %v", h, got, want)
		}
	}
}
