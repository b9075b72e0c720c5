package release

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// signedBundle publishes release v and returns its directory, its bundle
// and the key that signed it.
func signedBundle(t *testing.T, v string) (dir, bundle string, key ed25519.PrivateKey) {
	t.Helper()
	root, key := testRelease(t, v)
	dir = filepath.Join(root, Line(v), v)
	return dir, filepath.Join(dir, BundleName(v, "linux", "arm64")), key
}

func copyTo(t *testing.T, from, dir string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, filepath.Base(from))
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return to
}

// TestSignedBundleAccepted: a bundle `make release` published is accepted
// by its .sig, copied anywhere with it; without its .sig, by the signed
// index beside it; and each says which key signed.
func TestSignedBundleAccepted(t *testing.T) {
	_, bundle, key := signedBundle(t, "0.6.0")
	defer TrustForTest(pub(key))()
	proof, id, err := VerifyBundleFile(bundle)
	if err != nil || id != KeyID(pub(key)) || len(proof.Signature) == 0 {
		t.Fatalf("in its release directory: key %q, proof %+v, %v", id, proof, err)
	}
	away := t.TempDir()
	copyTo(t, bundle+SigSuffix, away)
	if _, id, err := VerifyBundleFile(copyTo(t, bundle, away)); err != nil || id != KeyID(pub(key)) {
		t.Fatalf("copied with its .sig: key %q, %v", id, err)
	}
	if err := os.Remove(bundle + SigSuffix); err != nil {
		t.Fatal(err)
	}
	proof, id, err = VerifyBundleFile(bundle)
	if err != nil || id != KeyID(pub(key)) || proof.Signature != nil || len(proof.Index) == 0 {
		t.Fatalf("by the signed index: key %q, proof %+v, %v", id, proof, err)
	}
	// By hand: releasekey sign writes the same signature.
	alone := copyTo(t, bundle, t.TempDir())
	if err := SignBundle(alone, key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyBundleFile(alone); err != nil {
		t.Fatalf("signed by hand: %v", err)
	}
}

// TestBundleRefusals: unsigned, signed by a key the build does not
// trust, tampered after signing (by .sig and by index), listed by another
// release's index, and any bundle on a build without keys: each refused
// naming the file and the trusted keys.
func TestBundleRefusals(t *testing.T) {
	dir, bundle, key := signedBundle(t, "0.6.0")
	trusted := KeyID(pub(key))
	defer TrustForTest(pub(key))()
	check := func(what string, p string, names ...string) {
		t.Helper()
		_, _, err := VerifyBundleFile(p)
		if !errors.Is(err, ErrUntrusted) {
			t.Fatalf("%s: %v, want a refusal", what, err)
		}
		refused(t, what, err, append([]string{"bundle " + p + ": not signed by a trusted release key (trusted: " + trusted + ")"}, names...)...)
	}

	unsigned := copyTo(t, bundle, t.TempDir())
	check("unsigned", unsigned, filepath.Base(unsigned)+SigSuffix, IndexName)

	otherDir, otherBundle, other := signedBundle(t, "0.6.1")
	check("signed by an untrusted key", otherBundle, "signed by key "+KeyID(pub(other)), "does not trust")
	// The other release's index, signed by the trusted key, does not make
	// its bundle trusted: it lists only its own.
	if err := os.Remove(otherBundle + SigSuffix); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{IndexName, IndexName + SigSuffix} {
		copyTo(t, filepath.Join(dir, f), otherDir)
	}
	check("listed by another release's index", otherBundle, "release 0.6.0 does not list")

	tamper := func(p string) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte{0})
		f.Close()
	}
	tamper(bundle)
	check("tampered, by its .sig", bundle, "does not match its content")
	os.Remove(bundle + SigSuffix)
	check("tampered, by the index", bundle, "does not list a bundle of sha256")

	if err := os.WriteFile(filepath.Join(dir, IndexName+SigSuffix), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("a broken index signature", bundle, "is not a signature file")

	restore := TrustForTest([]ed25519.PublicKey{}...)
	_, _, err := VerifyBundleFile(unsigned)
	restore()
	if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "trusted: none") || !strings.Contains(err.Error(), "trusts no release key") {
		t.Fatalf("a build without keys: %v", err)
	}
}

// TestBundleStatementIsNotAnIndex: a bundle's signature cannot stand for
// an index's and the other way round.
func TestBundleStatementIsNotAnIndex(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	sum := strings.Repeat("ab", 32)
	sig := Sign(BundleStatement(sum), key)
	if err := Verify(IndexName, BundleStatement(sum), sig, []ed25519.PublicKey{pub(key)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseIndex(IndexName, BundleStatement(sum)); err == nil {
		t.Fatal("a bundle statement parses as an index")
	}
}

// TestChannelReleaseProof: a bundle fetched from a channel goes to the
// Machines with its release's signed index, which vouches for it there
// (a release published before bundles had a .sig too).
func TestChannelReleaseProof(t *testing.T) {
	dir, bundle, key := signedBundle(t, "0.6.0")
	if err := os.Remove(bundle + SigSuffix); err != nil {
		t.Fatal(err)
	}
	r, err := fetch(t, filepath.Dir(filepath.Dir(dir)), "0.6.0", pub(key))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.Index.Find(KindBundle, "linux", "arm64")
	dst := filepath.Join(t.TempDir(), a.Name)
	if err := r.Download(context.Background(), a, dst, 0o600); err != nil {
		t.Fatal(err)
	}
	sum, size, _ := Digest(dst)
	if id, err := VerifyBundle(a.Name, sum, size, r.Proof(), []ed25519.PublicKey{pub(key)}); err != nil || id != r.KeyID {
		t.Fatalf("the release's proof: key %q, %v", id, err)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	if _, err := VerifyBundle(a.Name, sum, size, r.Proof(), []ed25519.PublicKey{pub(other)}); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("on a Machine trusting another key: %v", err)
	}
}
