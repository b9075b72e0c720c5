package client

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/internal/version"
)

// writeBundle writes a bundle of protocol major into dir under name,
// carrying bin/ployzd.
func writeBundle(t *testing.T, dir, name string, major int) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ployzd")
	if err := os.WriteFile(bin, []byte("daemon"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := release.Manifest{Version: "9.9.9", ProtocolMajor: major, OS: "linux", Arch: runtime.GOARCH}
	if _, err := release.Write(f, m, []release.Source{{Path: "bin/ployzd", From: bin}}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBundlePathAndOpen: a named bundle is taken as named; else this
// version's beside the program, whose absence names --bundle; a bundle
// of another protocol major is refused.
func TestBundlePathAndOpen(t *testing.T) {
	dir := t.TempDir()
	if p, err := BundlePath("x.tar.gz", dir); err != nil || p != "x.tar.gz" {
		t.Fatalf("named: %q %v", p, err)
	}
	if _, err := BundlePath("", dir); err == nil || !strings.Contains(err.Error(), "--bundle: no "+OwnBundle()) {
		t.Fatalf("none beside: %v", err)
	}
	own := writeBundle(t, dir, OwnBundle(), version.ProtocolMajor)
	if p, err := BundlePath("", dir); err != nil || p != own {
		t.Fatalf("beside: %q %v", p, err)
	}
	if m, err := OpenBundle(own); err != nil || m.Version != "9.9.9" {
		t.Fatalf("open: %+v %v", m, err)
	}
	other := writeBundle(t, dir, "other.tar.gz", version.ProtocolMajor+1)
	if _, err := OpenBundle(other); err == nil || !strings.Contains(err.Error(), "never crosses a protocol major") {
		t.Fatalf("another major: %v", err)
	}
}

// TestOpenSignedBundle: a --bundle signed by a trusted key opens with its
// proof for the Machines; unsigned, signed by another key, or changed
// after signing, it is refused naming the file and the trusted key.
func TestOpenSignedBundle(t *testing.T) {
	key, restore := release.TrustNewKeyForTest()
	t.Cleanup(restore)
	trusted := release.KeyID(key.Public().(ed25519.PublicKey))
	dir := t.TempDir()
	p := writeBundle(t, dir, "b.tar.gz", version.ProtocolMajor)
	refused := func(what, says string) {
		t.Helper()
		_, _, err := OpenSignedBundle(p)
		if err == nil || !strings.Contains(err.Error(), "bundle "+p+": not signed by a trusted release key (trusted: "+trusted+")") || !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused("unsigned", "no b.tar.gz.sig beside it")
	_, other, _ := ed25519.GenerateKey(nil)
	if err := release.SignBundle(p, other); err != nil {
		t.Fatal(err)
	}
	refused("signed by another key", "which this build does not trust")
	if err := release.SignBundle(p, key); err != nil {
		t.Fatal(err)
	}
	b, id, err := OpenSignedBundle(p)
	if err != nil || id != trusted || b.Manifest.Version != "9.9.9" || b.Path != p || b.Proof == nil || len(b.Proof.Signature) == 0 {
		t.Fatalf("signed: %+v key %q %v", b, id, err)
	}
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("x"))
	f.Close()
	refused("tampered", "does not match its content")
}

// TestInstallDir: without a bundle the loose binaries of dir are
// installed, said so; an unsigned bundle is refused, naming it; a signed
// one is unpacked with this program's binary beside its own, and cleanup
// removes it.
func TestInstallDir(t *testing.T) {
	key, restore := release.TrustNewKeyForTest()
	t.Cleanup(restore)
	dir := t.TempDir()
	var said []string
	progress := func(f string, a ...any) { said = append(said, f) }
	if bin, _, err := InstallDir(dir, "", progress); err != nil || bin != dir || len(said) != 1 || !strings.Contains(said[0], "loose binaries") {
		t.Fatalf("no bundle: %q %v %q", bin, err, said)
	}
	own := writeBundle(t, dir, OwnBundle(), version.ProtocolMajor)
	if _, _, err := InstallDir(dir, "", progress); err == nil || !strings.Contains(err.Error(), "bundle "+own+": not signed by a trusted release key") {
		t.Fatalf("unsigned bundle beside the CLI: %v", err)
	}
	if err := release.SignBundle(own, key); err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(t.TempDir(), "ployz")
	if err := os.WriteFile(self, []byte("cli"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, cleanup, err := InstallDir(dir, self, progress)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(bin, "ployzd")); err != nil || string(b) != "daemon" {
		t.Fatalf("ployzd unpacked: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(bin, "ployz")); runtime.GOOS == "linux" && (err != nil || string(b) != "cli") {
		t.Fatalf("this program beside it: %q %v", b, err)
	}
	cleanup()
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Fatalf("cleanup left %s: %v", bin, err)
	}
}

// TestUpgradeWithBundle: channel flags without --bundle, or no bundle
// named and none beside the CLI, take the channel; a named bundle is
// opened signed (refused unsigned) and carried with the upgrade's other
// fields.
func TestUpgradeWithBundle(t *testing.T) {
	key, restore := release.TrustNewKeyForTest()
	t.Cleanup(restore)
	up := Upgrade{Names: []string{"m1"}, Plugin: "dns"}
	if got, ch, err := up.WithBundle("", true); err != nil || !ch || got.Bundle != "" {
		t.Fatalf("channel flags: %+v %v %v", got, ch, err)
	}
	// The test binary has no bundle beside it (go test builds it alone).
	if _, err := os.Stat(filepath.Join(ExecutableDir(), OwnBundle())); err != nil {
		if _, ch, err := up.WithBundle("", false); err != nil || !ch {
			t.Fatalf("none beside the CLI: %v %v", ch, err)
		}
	}
	p := writeBundle(t, t.TempDir(), "b.tar.gz", version.ProtocolMajor)
	if _, ch, err := up.WithBundle(p, true); err == nil || ch || !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("unsigned: %v %v", ch, err)
	}
	if err := release.SignBundle(p, key); err != nil {
		t.Fatal(err)
	}
	got, ch, err := up.WithBundle(p, true)
	if err != nil || ch || got.Bundle != p || got.Proof == nil || got.Manifest == nil || got.Plugin != "dns" || len(got.Names) != 1 {
		t.Fatalf("signed: %+v %v %v", got, ch, err)
	}
}
