package daemon

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	servingfeature "github.com/ployz/ployz/core/daemon/feature/serving"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ployz/ployz/core/machine/trust"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

type testSigner struct{ k ed25519.PrivateKey }

func newTestSigner(t *testing.T) testSigner {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testSigner{k}
}

func (s testSigner) PublicKey() string {
	return base64.StdEncoding.EncodeToString(s.k.Public().(ed25519.PublicKey))
}
func (s testSigner) Sign(msg []byte) []byte { return ed25519.Sign(s.k, msg) }

// signedRow is Machine id's own row with subnet, signed by s.
func signedRow(t *testing.T, s testSigner, id, subnet string) store.Row[store.MachineBody] {
	t.Helper()
	b := store.MachineBody{Name: id, Subnet: subnet, Phase: serving.Participating, RPCKey: s.PublicKey(), SignedAt: time.Now().UnixMilli()}
	if err := trust.Sign(s, id, id, &b); err != nil {
		t.Fatal(err)
	}
	return rawRow(t, id, b)
}

func rawRow(t *testing.T, id string, b store.MachineBody) store.Row[store.MachineBody] {
	t.Helper()
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.DecodeRow[store.MachineBody]("machines", []any{id, id, string(raw), int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTrustedMachinesFile: the trust list ployzd hands the serving plugins
// holds the rows the Verifier accepted (for a refused newer row, the last
// accepted one), never a forged Machine, and is root's only (0600).
func TestTrustedMachinesFile(t *testing.T) {
	dir := t.TempDir()
	s1, s2, forger := newTestSigner(t), newTestSigner(t), newTestSigner(t)
	v, err := trust.Open(filepath.Join(dir, trust.PinsFile), s1.PublicKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Replace(trust.Pins{Strict: true, Machines: map[string]trust.Pin{
		"m2": {RPCKey: s2.PublicKey(), Signed: true, SelfSigned: true}}}); err != nil {
		t.Fatal(err)
	}
	m1, m2 := signedRow(t, s1, "m1", "10.210.1.0/24"), signedRow(t, s2, "m2", "10.210.2.0/24")
	path := filepath.Join(dir, "run", serving.TrustedFileName)
	w := trustedWriter{path: path}
	read := func() serving.TrustedMachines {
		t.Helper()
		got, err := serving.ReadTrusted(path)
		if err != nil || got == nil {
			t.Fatalf("read the trust list: %v %v", got, err)
		}
		return *got
	}
	want := serving.TrustedMachines{Machines: map[string]serving.TrustedMachine{
		"m1": {Subnet: "10.210.1.0/24", Phase: serving.Participating},
		"m2": {Subnet: "10.210.2.0/24", Phase: serving.Participating}}}
	if err := w.write(v.Check("m1", []store.Row[store.MachineBody]{m1, m2})); err != nil {
		t.Fatal(err)
	}
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Fatalf("accepted rows: %+v, want %+v", got, want)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", fi.Mode(), err)
	}

	// A store writer forges m9 (a new id, signed by a key nobody
	// endorsed) and moves m2 to another subnet (its signature no longer
	// verifies): both refused, so the list still says what it said.
	m9 := signedRow(t, forger, "m9", "10.210.99.0/24")
	moved := m2.Body
	moved.Subnet = "10.210.20.0/24"
	vs := v.Check("m1", []store.Row[store.MachineBody]{m1, rawRow(t, "m2", moved), m9})
	for _, vd := range vs[1:] {
		if vd.Status != trust.Refused {
			t.Fatalf("%s: %s, want refused", vd.Row.Key, vd.Status)
		}
	}
	if err := w.write(vs); err != nil {
		t.Fatal(err)
	}
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after forging: %+v, want %+v (refused rows excluded, m2's last accepted subnet kept)", got, want)
	}
	if now, _ := os.Stat(path); !os.SameFile(fi, now) {
		t.Fatal("verdicts that change nothing rewrote the file (each rewrite wakes both plugins)")
	}

	// m2 signs its move: the list follows.
	m2b := signedRow(t, s2, "m2", "10.210.20.0/24")
	if err := w.write(v.Check("m1", []store.Row[store.MachineBody]{m1, m2b, m9})); err != nil {
		t.Fatal(err)
	}
	want.Machines["m2"] = serving.TrustedMachine{Subnet: "10.210.20.0/24", Phase: serving.Participating}
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after m2's signed move: %+v, want %+v", got, want)
	}
}

// TestTrustListRemovedOnReset: the list goes with the serving plugins'
// files on reset (TestServingSpecs: their specs name it).
func TestTrustListRemovedOnReset(t *testing.T) {
	d := &Daemon{}
	d.cfg.RunDir = "/run/ployz"
	want := "/run/ployz/" + serving.TrustedFileName
	for _, p := range []servingfeature.Plugin{d.serving().DNSPlugin(), d.serving().IngressPlugin()} {
		found := false
		for _, k := range p.Kept {
			found = found || k == want
		}
		if !found {
			t.Errorf("%s: %s is not removed on reset (kept %v)", p.Name, want, p.Kept)
		}
	}
}
