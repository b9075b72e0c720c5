package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// certPair is a self-signed certificate for names valid until notAfter,
// and its key, in PEM.
func certPair(t *testing.T, notAfter time.Time, names ...string) (string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(5), Subject: pkix.Name{CommonName: "ca.test"}, DNSNames: names,
		NotBefore: notAfter.Add(-90 * 24 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
}

// add_certificate seals the key in a "user:" row that list_certificates
// shows without it and remove_certificate deletes by a name it covers;
// each refusal names the field and writes nothing.
func TestUserCertificateAddListRemove(t *testing.T) {
	f, st, dir := newTest(t)
	certPEM, keyPEM := certPair(t, time.Now().Add(60*24*time.Hour), "example.test", "*.example.test")
	_, otherKey := certPair(t, time.Now().Add(time.Hour), "example.test")
	oldPEM, oldKey := certPair(t, time.Now().Add(-time.Hour), "example.test")
	for _, bad := range []struct {
		req   rpc.AddCertificateRequest
		field string
	}{
		{rpc.AddCertificateRequest{CertPEM: certPEM, KeyPEM: otherKey}, "key_pem"},
		{rpc.AddCertificateRequest{CertPEM: oldPEM, KeyPEM: oldKey}, "cert_pem"},
		{rpc.AddCertificateRequest{CertPEM: "not pem", KeyPEM: keyPEM}, "cert_pem"},
		{rpc.AddCertificateRequest{CertPEM: certPEM}, "key_pem"},
	} {
		if _, err := featuretest.Call(t, featuretest.Typed(f.addCertificate), bad.req); err == nil || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("refusal %v does not name %s", err, bad.field)
		}
	}
	if rows, _ := st.Certificates().List(t.Context()); len(rows) != 0 {
		t.Fatalf("a refusal wrote %d rows", len(rows))
	}

	out, err := featuretest.Call(t, featuretest.Typed(f.addCertificate), rpc.AddCertificateRequest{CertPEM: certPEM, KeyPEM: keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	v := out.(rpc.CertificateView)
	row, ok, err := st.Certificates().Get(t.Context(), ingress.UserCertRow(v.ID))
	if err != nil || !ok {
		t.Fatalf("row %s: %v %v", v.ID, ok, err)
	}
	if !strings.HasPrefix(row.Body.KeyPEM, store.SealedPrefix) || strings.Contains(row.Body.KeyPEM, "PRIVATE") {
		t.Fatalf("key_pem not sealed: %.40q", row.Body.KeyPEM)
	}
	secret, _ := store.LoadClusterSecret(dir)
	sealer, _ := store.NewSealer(secret, store.CertificateKeysPurpose, "certificates", "key_pem")
	if key, err := sealer.Open(row.Key, row.Body.KeyPEM); err != nil || string(key) != keyPEM {
		t.Fatalf("open key_pem: %v", err)
	}

	list, err := featuretest.Call(t, featuretest.Typed(f.listCertificates), rpc.None{})
	if err != nil {
		t.Fatal(err)
	}
	cs := list.(rpc.CertificateList).Certificates
	if len(cs) != 1 || cs[0].Source != "user" || !slices.Equal(cs[0].Names, []string{"*.example.test", "example.test"}) || cs[0].Issuer != "CN=ca.test" {
		t.Fatalf("list %+v", cs)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.removeCertificate), rpc.RemoveCertificateRequest{Name: "nothing.test"}); err == nil {
		t.Fatal("removing an unknown name succeeded")
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.removeCertificate), rpc.RemoveCertificateRequest{Name: "*.example.test"}); err != nil {
		t.Fatal(err)
	}
	if rows, _ := st.Certificates().List(t.Context()); len(rows) != 0 {
		t.Fatalf("%d rows left after rm", len(rows))
	}
}

// The user row is a replicated format: the fixture (with a field from a
// newer version) reads, its view needs no cert_pem, and its sealed
// key_pem (the ingress plugin's pinned form) opens with ployzd's sealer.
func TestUserCertificateRowFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/certificates-user-row.json")
	if err != nil {
		t.Fatal(err)
	}
	var body sdkstore.CertificateBody
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	v := certificateView(sdkstore.Row[sdkstore.CertificateBody]{Key: "user:0123456789ab", Body: body})
	want := rpc.CertificateView{ID: "0123456789ab", Source: "user", Names: []string{"*.example.test", "example.test"},
		Issuer: "CN=Example CA,O=Example", NotBefore: 1796000000, NotAfter: 1803776000, AddedAt: 1796620000}
	if got, exp := string(mustJSON(t, v)), string(mustJSON(t, want)); got != exp {
		t.Fatalf("view %s, want %s", got, exp)
	}
	secret, _ := sdkstore.ParseClusterSecret(strings.Repeat("10", 32))
	sealer, _ := store.NewSealer(secret, store.CertificateKeysPurpose, "certificates", "key_pem")
	if key, err := sealer.Open("a.example.test", body.KeyPEM); err != nil || string(key) != "private key" {
		t.Fatalf("ployzd's sealer does not open the plugin's pinned form: %q %v", key, err)
	}
}
