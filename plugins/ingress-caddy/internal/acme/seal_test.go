package acme

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// testSealer derives a sealer from a Cluster secret of 32 bytes b.
func testSealer(t *testing.T, b byte) *Sealer {
	t.Helper()
	sec, err := store.ParseClusterSecret(strings.Repeat(string("0123456789abcdef"[b%16])+"0", 32))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSealer(sec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealRoundTrip(t *testing.T) {
	s := testSealer(t, 1)
	_, key := selfSigned(t, time.Now(), time.Now().Add(time.Hour), "a.example.test")
	x, err := s.Seal("a.example.test", key)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := s.Seal("a.example.test", key)
	if !strings.HasPrefix(x, SealedPrefix) || strings.Contains(x, "PRIVATE KEY") || x == y {
		t.Fatalf("sealed form %q (second %q): want the prefix, no plain text, a fresh nonce each time", x, y)
	}
	for _, row := range []string{"a.example.test", "A.Example.Test"} {
		got, plain, err := s.Open(row, x)
		if err != nil || plain || got != key {
			t.Fatalf("open as %s: plain=%v err=%v, same key %v", row, plain, err, got == key)
		}
	}
	got, plain, err := s.Open("a.example.test", key)
	if err != nil || !plain || got != key {
		t.Fatalf("a plain key (an old row): plain=%v err=%v", plain, err)
	}
}

// Any change to the sealed bytes, the row it belongs to or the key is
// refused naming the row; nothing of the key comes out.
func TestSealRefusesTamperAndWrongKey(t *testing.T) {
	s := testSealer(t, 1)
	_, key := selfSigned(t, time.Now(), time.Now().Add(time.Hour), "a.example.test")
	x, _ := s.Seal("a.example.test", key)
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(x, SealedPrefix))
	flipped := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return SealedPrefix + base64.StdEncoding.EncodeToString(b)
	}
	cases := []struct {
		name, row, stored string
		sealer            *Sealer
		want              string
	}{
		{"nonce", "a.example.test", flipped(0), s, "does not open"},
		{"ciphertext", "a.example.test", flipped(30), s, "does not open"},
		{"tag", "a.example.test", flipped(len(raw) - 1), s, "does not open"},
		{"moved to another row", "b.example.test", x, s, "does not open"},
		{"another Cluster's key", "a.example.test", x, testSealer(t, 2), "does not open"},
		{"truncated", "a.example.test", SealedPrefix + base64.StdEncoding.EncodeToString(raw[:30]), s, "not a well-formed"},
		{"not base64", "a.example.test", SealedPrefix + "!!", s, "not a well-formed"},
		{"future version", "a.example.test", "enc:v2:AAAA", s, `version "v2"`},
	}
	for _, c := range cases {
		got, _, err := c.sealer.Open(c.row, c.stored)
		if err == nil || got != "" || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `row "`+c.row+`"`) {
			t.Errorf("%s: key %d bytes, err %v; want an error naming the row with %q", c.name, len(got), err, c.want)
		}
	}
}

// The sealed form is a replicated format: this pins it byte for byte
// (docs/formats.md), and a sealer must keep opening it.
func TestSealedFormatFixture(t *testing.T) {
	s := testSealer(t, 1)
	nonce := make([]byte, 24)
	for i := range nonce {
		nonce[i] = byte(i)
	}
	// Computed outside Go (Python: HMAC-SHA256 derivation, HChaCha20,
	// then the cryptography package's ChaCha20-Poly1305) from secret
	// 0x10×32, nonce 00..17, row a.example.test, plain text "private key".
	const pinned = "enc:v1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYX80V+p1qTaEFcUrrUbJHrnUvIJPHcFlZVrqeQ"
	got, err := s.sealWith(nonce, "a.example.test", "private key")
	if err != nil {
		t.Fatal(err)
	}
	if got != pinned {
		t.Fatalf("sealed form changed:\n got %s\nwant %s", got, pinned)
	}
	key, plain, err := s.Open("a.example.test", pinned)
	if err != nil || plain || key != "private key" {
		t.Fatalf("open the pinned form: %q plain=%v err=%v", key, plain, err)
	}
}

// A Manager with Keys: an old plain-text row is served and rewritten
// sealed; a tampered row and another Cluster's row are skipped naming
// the row, and no certificate is served from them.
func TestManagerSealsOldRowsAndRefusesBrokenOnes(t *testing.T) {
	now := time.Now()
	st := newMemStore("m-a")
	cert, key := selfSigned(t, now.Add(-time.Hour), now.Add(24*time.Hour), "old.example.test")
	st.PutCertificate(t.Context(), store.Row[store.CertificateBody]{Key: "old.example.test", Owner: "m-x",
		Body: store.CertificateBody{CertPEM: cert, KeyPEM: key, Issuer: "m-x"}})
	m := planManager(t, "m-a", &now, st)
	m.cfg.Store = newSealingStore(st, testSealer(t, 1), nil)
	m.Want([]string{"old.example.test"})
	eval := func() Snapshot {
		rows, err := m.cfg.Store.Certificates(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		m.evaluate(rows, []string{"m-a"})
		m.issuing = ""
		return m.Snapshot()
	}
	snap := eval()
	if len(snap.TLS.Certificates) != 1 || snap.TLS.Certificates[0].KeyPEM != key || len(snap.Skipped) != 0 {
		t.Fatalf("the plain row is not served as before: %+v", snap)
	}
	row, _ := st.row("old.example.test")
	if !strings.HasPrefix(row.Body.KeyPEM, SealedPrefix) || row.Owner != "m-x" || row.Body.CertPEM != cert {
		t.Fatalf("the plain row was not rewritten sealed (and otherwise unchanged): %.60q owner %s", row.Body.KeyPEM, row.Owner)
	}
	puts := len(st.puts)
	if snap = eval(); len(snap.TLS.Certificates) != 1 || len(st.puts) != puts {
		t.Fatalf("a sealed row is served without a rewrite: %d certificates, %d writes", len(snap.TLS.Certificates), len(st.puts)-puts)
	}

	other, _ := testSealer(t, 2).Seal("old.example.test", key)
	for name, bad := range map[string]string{"tampered": row.Body.KeyPEM[:len(row.Body.KeyPEM)-4] + "AAA=", "another Cluster's": other} {
		r := row
		r.Body.KeyPEM = bad
		st.PutCertificate(t.Context(), r)
		snap = eval()
		if len(snap.TLS.Certificates) != 0 {
			t.Fatalf("%s row: a certificate was served", name)
		}
		if len(snap.Skipped) != 1 || snap.Skipped[0].Name != "old.example.test" ||
			!strings.Contains(snap.Skipped[0].Reason, `row "old.example.test": field "key_pem" is sealed`) {
			t.Fatalf("%s row: skipped %+v", name, snap.Skipped)
		}
		if s := snap.States[0]; s.State == ingress.CertIssued || !strings.Contains(s.Detail, "row skipped") {
			t.Fatalf("%s row: state %+v", name, s)
		}
		if got, _ := st.row("old.example.test"); got.Body.KeyPEM != bad {
			t.Fatalf("%s row was rewritten by a reader", name)
		}
	}
}

// Keys are sealed only once every participating Machine running an
// ingress advertises sealed keys; before that they are written plain, as
// an older Machine writes them, and plain rows are left plain (no
// re-ordering loop between versions). Sealed rows open either way.
func TestSealingWaitsForEveryIngressMachine(t *testing.T) {
	now := time.Now()
	ctx := t.Context()
	st := newMemStore("m-a")
	old := store.Row[store.MachineBody]{Key: "m-b", Owner: "m-b", Body: store.MachineBody{Name: "m-b", Phase: "participating",
		Version: "0.9.0", Capabilities: []string{ingress.CapHTTP, ingress.CapTCP}}}
	noIngress := store.Row[store.MachineBody]{Key: "m-c", Owner: "m-c", Body: store.MachineBody{Phase: "participating",
		Capabilities: []string{"ployz.machine.publish.v1"}}}
	joining := store.Row[store.MachineBody]{Key: "m-d", Owner: "m-d", Body: store.MachineBody{Phase: "joining"}}
	st.machines = append(st.machines, old, noIngress, joining)
	ss := newSealingStore(st, testSealer(t, 1), nil)
	cert, key := selfSigned(t, now.Add(-time.Hour), now.Add(24*time.Hour), "a.example.test")
	row := store.Row[store.CertificateBody]{Key: "a.example.test", Owner: "m-a", Body: store.CertificateBody{CertPEM: cert, KeyPEM: key}}

	if ok, why := sealingAllowed(st.machines); ok || !strings.Contains(why, "m-b") || !strings.Contains(why, ingress.CapSealedKeys) {
		t.Fatalf("sealingAllowed with an old ingress Machine: %v %q", ok, why)
	}
	if err := ss.PutCertificate(ctx, row); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.row("a.example.test"); got.Body.KeyPEM != key {
		t.Fatalf("written sealed while m-b cannot open it: %.40q", got.Body.KeyPEM)
	}
	puts := len(st.puts)
	rows, err := ss.Certificates(ctx)
	if err != nil || len(rows) != 1 || rows[0].Body.KeyPEM != key || len(st.puts) != puts {
		t.Fatalf("plain row read: %d rows, %d rewrites, %v", len(rows), len(st.puts)-puts, err)
	}

	// m-b upgrades: the plain row is rewritten sealed on the next read,
	// and new writes are sealed. The Machines without an ingress, or not
	// yet participating, never held sealing back.
	st.mu.Lock()
	st.machines[1].Body.Capabilities = append(st.machines[1].Body.Capabilities, ingress.CapSealedKeys)
	st.mu.Unlock()
	if rows, err = ss.Certificates(ctx); err != nil || rows[0].Body.KeyPEM != key {
		t.Fatalf("read after upgrade: %v", err)
	}
	sealed, _ := st.row("a.example.test")
	if !strings.HasPrefix(sealed.Body.KeyPEM, SealedPrefix) {
		t.Fatalf("not sealed once every ingress Machine reads sealed keys: %.40q", sealed.Body.KeyPEM)
	}

	// A Machine older than capabilities joins: writes go plain again, and
	// the sealed row still opens here.
	st.mu.Lock()
	st.machines = append(st.machines, store.Row[store.MachineBody]{Key: "m-e", Owner: "m-e", Body: store.MachineBody{Phase: "participating"}})
	st.mu.Unlock()
	if rows, err = ss.Certificates(ctx); err != nil || len(rows) != 1 || rows[0].Body.KeyPEM != key {
		t.Fatalf("sealed row with the gate closed: %v", err)
	}
	row2 := row
	row2.Key = "b.example.test"
	if err := ss.PutCertificate(ctx, row2); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.row("b.example.test"); got.Body.KeyPEM != key {
		t.Fatalf("sealed although m-e advertises nothing: %.40q", got.Body.KeyPEM)
	}
}
