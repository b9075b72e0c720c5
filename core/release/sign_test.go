package release

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testRelease publishes a release of version v with one bundle and one
// CLI into a new source directory, signed by a new key, and returns the
// directory and the key.
func testRelease(t *testing.T, v string) (string, ed25519.PrivateKey) {
	t.Helper()
	root := t.TempDir()
	priv, _, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParsePrivateKey(priv, "test")
	if err != nil {
		t.Fatal(err)
	}
	addVersion(t, root, v, key)
	return root, key
}

func addVersion(t *testing.T, root, v string, key ed25519.PrivateKey) {
	t.Helper()
	dir := filepath.Join(root, Line(v), v)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := Write(&b, Manifest{Version: v, ProtocolMajor: 1, OS: "linux", Arch: "arm64"}, writeSources(t)); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{BundleName(v, "linux", "arm64"): b.Bytes(), CLIName(v, "darwin", "arm64"): []byte("cli " + v)}
	for n, body := range files {
		if err := os.WriteFile(filepath.Join(dir, n), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ix := Index{Version: v, ProtocolMajor: 1, Artifacts: []Artifact{
		{Name: BundleName(v, "linux", "arm64"), Kind: KindBundle, OS: "linux", Arch: "arm64"},
		{Name: CLIName(v, "darwin", "arm64"), Kind: KindCLI, OS: "darwin", Arch: "arm64"}}}
	if _, err := Publish(root, ix, key, []string{"stable"}); err != nil {
		t.Fatal(err)
	}
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func fetch(t *testing.T, src, v string, keys ...ed25519.PublicKey) (*Release, error) {
	t.Helper()
	o, err := OpenOrigin(src)
	if err != nil {
		t.Fatal(err)
	}
	return o.Release(context.Background(), Line(v), v, keys)
}

func TestReleaseVerifies(t *testing.T) {
	root, key := testRelease(t, "0.5.0")
	// Over HTTP as from a directory: the same files.
	srv := httptest.NewServer(http.FileServer(http.Dir(root)))
	defer srv.Close()
	for _, src := range []string{root, "file://" + root, srv.URL} {
		o, err := OpenOrigin(src)
		if err != nil {
			t.Fatal(err)
		}
		v, err := o.Resolve(context.Background(), "v0", "stable")
		if err != nil || v != "0.5.0" {
			t.Fatalf("%s: stable is %q, %v", src, v, err)
		}
		r, err := o.Release(context.Background(), "v0", v, []ed25519.PublicKey{pub(key)})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		a, ok := r.Index.Find(KindBundle, "linux", "arm64")
		if !ok || r.KeyID != KeyID(pub(key)) {
			t.Fatalf("%s: index %+v, key %s", src, r.Index, r.KeyID)
		}
		dst := filepath.Join(t.TempDir(), a.Name)
		if err := r.Download(context.Background(), a, dst, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := OpenManifest(dst)
		if err != nil || m.Version != "0.5.0" {
			t.Fatalf("downloaded bundle: %+v %v", m, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "v0", "0.5.0", SumsName)); err != nil {
		t.Fatal(err)
	}
}

// refused checks err is a refusal naming every one of names.
func refused(t *testing.T, what string, err error, names ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted", what)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Fatalf("%s: error %q does not name %q", what, err, n)
		}
	}
	t.Logf("%s: %v", what, err)
}

func TestReleaseRefusals(t *testing.T) {
	root, key := testRelease(t, "0.5.0")
	dir := filepath.Join(root, "v0", "0.5.0")
	index := filepath.Join(dir, IndexName)
	_, otherPriv, _ := ed25519.GenerateKey(nil)

	t.Run("wrong key", func(t *testing.T) {
		_, err := fetch(t, root, "0.5.0", pub(otherPriv))
		refused(t, "signed by another key", err, index, KeyID(pub(key)), KeyID(pub(otherPriv)), "does not trust")
		if !errors.Is(err, ErrUntrusted) {
			t.Fatalf("not ErrUntrusted: %v", err)
		}
	})
	t.Run("no trusted key", func(t *testing.T) {
		_, err := fetch(t, root, "0.5.0")
		refused(t, "a build without keys", err, index, "trusts no release key")
	})
	t.Run("tampered index", func(t *testing.T) {
		orig, _ := os.ReadFile(index)
		defer os.WriteFile(index, orig, 0o644)
		os.WriteFile(index, bytes.Replace(orig, []byte(`"size": `), []byte(`"size":  `), 1), 0o644)
		_, err := fetch(t, root, "0.5.0", pub(key))
		refused(t, "tampered index", err, index, KeyID(pub(key)), "does not match")
	})
	t.Run("missing signature", func(t *testing.T) {
		sig, _ := os.ReadFile(index + SigSuffix)
		defer os.WriteFile(index+SigSuffix, sig, 0o644)
		os.Remove(index + SigSuffix)
		_, err := fetch(t, root, "0.5.0", pub(key))
		refused(t, "unsigned", err, index, "unsigned")
	})
	t.Run("tampered bundle", func(t *testing.T) {
		r, err := fetch(t, root, "0.5.0", pub(key))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := r.Index.Find(KindBundle, "linux", "arm64")
		p := filepath.Join(dir, a.Name)
		orig, _ := os.ReadFile(p)
		defer os.WriteFile(p, orig, 0o644)
		bad := append([]byte(nil), orig...)
		bad[len(bad)/2] ^= 0xff
		os.WriteFile(p, bad, 0o644)
		dst := filepath.Join(t.TempDir(), "b.tar.gz")
		refused(t, "tampered bundle", r.Download(context.Background(), a, dst, 0o600), a.Name, KeyID(pub(key)), "sha256")
		if _, err := os.Stat(dst); !os.IsNotExist(err) {
			t.Fatalf("a refused download was left at %s", dst)
		}
	})
	t.Run("moved release", func(t *testing.T) {
		// A signed index of 0.5.0 served as 0.6.0: refused.
		if err := os.CopyFS(filepath.Join(root, "v0", "0.6.0"), os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		_, err := fetch(t, root, "0.6.0", pub(key))
		refused(t, "moved", err, "0.5.0", "not 0.6.0")
	})
}

// A v1 release is refused where v0 runs; its channel is not even looked
// up under v0.
func TestReleaseLine(t *testing.T) {
	root, key := testRelease(t, "1.0.0")
	r, err := fetch(t, root, "1.0.0", pub(key))
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "v1 to v0", r.Index.CheckLine("Machine m1 (0.9.0)", Line("0.9.0")), "1.0.0", "line v1", "m1", "v0")
	if err := r.Index.CheckLine("Machine m1", "v1"); err != nil {
		t.Fatal(err)
	}
	o, _ := OpenOrigin(root)
	_, err = o.Resolve(context.Background(), "v0", "stable")
	refused(t, "v0 channel of a v1-only source", err, "v0/stable", "not found")
	for v, want := range map[string]string{"0.4.2": "v0", "v1.2.3": "v1", "ebafd6b-dirty": "v0", "12.0.0-rc1": "v12", "0.0.0-dev": "v0", "174911b": "v0", "1749115": "v0", "9.9.9-upgrade-test": "v9"} {
		if got := Line(v); got != want {
			t.Errorf("Line(%q) = %s, want %s", v, got, want)
		}
	}
}

func TestKeys(t *testing.T) {
	priv, pubText, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParsePrivateKey(priv, "f")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePublicKey(pubText)
	if err != nil || !p.Equal(pub(k)) {
		t.Fatalf("public key %v %v", p, err)
	}
	refusedKey := func(err error) { refused(t, "bad key", err, "base64") }
	_, err = ParsePrivateKey("nope", "f")
	refusedKey(err)
	_, err = ParsePublicKey("AAAA")
	refusedKey(err)
	defer TrustForTest(p)()
	got, err := TrustedKeys()
	if err != nil || len(got) != 1 || !got[0].Equal(p) {
		t.Fatalf("trusted %v %v", got, err)
	}
	t.Setenv(EnvReleaseKey, priv)
	if lk, err := LoadPrivateKey(""); err != nil || !lk.Equal(k) {
		t.Fatalf("key from env: %v", err)
	}
}

// Recorded from real hosts: `uname -s; uname -m; cat /etc/os-release`.
func TestParsePlatform(t *testing.T) {
	debian13 := "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\nID=debian\n"
	ubuntu := "PRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"24.04\"\n"
	raspbian := "PRETTY_NAME=\"Raspbian GNU/Linux 12 (bookworm)\"\nID=raspbian\nID_LIKE=debian\n"
	fedora := "NAME=\"Fedora Linux\"\nVERSION_ID=40\nID=fedora\nPRETTY_NAME=\"Fedora Linux 40 (Server Edition)\"\n"
	cases := []struct {
		out, arch, refuse string
	}{
		{"Linux\nx86_64\n" + debian13, "amd64", ""},
		{"Linux\naarch64\n" + ubuntu, "arm64", ""},   // AWS Graviton, Ampere
		{"Linux\narm64\n" + debian13, "arm64", ""},   // some kernels print arm64
		{"Linux\naarch64\n" + raspbian, "arm64", ""}, // Raspberry Pi OS 64-bit
		{"Linux\narmv7l\n" + raspbian, "", `"armv7l"`},
		{"Linux\narmv8l\n" + raspbian, "", `"armv8l"`}, // 32-bit userland on a 64-bit CPU
		{"Linux\ni686\n" + debian13, "", `"i686"`},
		{"Linux\nriscv64\n" + debian13, "", `"riscv64"`},
		{"Darwin\narm64\n", "", `"Darwin"`},
		{"Linux\nx86_64\n" + fedora, "", "Fedora Linux 40"},
		{"Linux\nx86_64\n", "", "no ID in /etc/os-release"},
		{"", "", "cannot read"},
	}
	for _, c := range cases {
		p, err := ParsePlatform(c.out)
		if c.refuse != "" {
			refused(t, strings.ReplaceAll(c.out[:min(len(c.out), 14)], "\n", " "), err, c.refuse)
			continue
		}
		if err != nil || p.Arch != c.arch || p.OS != "linux" {
			t.Errorf("%q: %+v %v, want %s", c.out, p, err, c.arch)
		}
	}
}
