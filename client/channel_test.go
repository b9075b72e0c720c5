package client

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/internal/version"
)

// TestChannelInstallDirOtherArch: the install directory for an arm64
// server holds the release's linux/arm64 bundle and CLI, whatever this
// computer runs (a macOS or amd64 laptop installing an arm64 server); a
// tampered bundle is refused naming it, and nothing is left.
func TestChannelInstallDirOtherArch(t *testing.T) {
	rc, dir := arm64Channel(t)
	const v = arm64Version
	plat, err := release.ParsePlatform("Linux\naarch64\nID=debian\nVERSION_ID=\"13\"\n")
	if err != nil {
		t.Fatal(err)
	}
	got, cleanup, err := ChannelInstallDir(context.Background(), rc, plat, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]string{"ployzd": "arm64 daemon", "ployz": "arm64 cli"} {
		if b, err := os.ReadFile(filepath.Join(got, n)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", n, b, err, want)
		}
	}
	cleanup()
	if _, err := os.Stat(got); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s", got)
	}
	if _, _, err := ChannelInstallDir(context.Background(), rc, release.Platform{OS: "linux", Arch: "amd64"}, func(string, ...any) {}); err == nil || !strings.Contains(err.Error(), "no bundle for linux/amd64") {
		t.Errorf("amd64 server from an arm64-only release: %v", err)
	}
	p := filepath.Join(dir, release.BundleName(v, "linux", "arm64"))
	b, _ := os.ReadFile(p)
	os.WriteFile(p, append(b, 0), 0o644)
	if _, _, err := ChannelInstallDir(context.Background(), rc, plat, func(string, ...any) {}); err == nil || !strings.Contains(err.Error(), release.BundleName(v, "linux", "arm64")) {
		t.Errorf("tampered bundle: %v", err)
	}
}

// arm64Version is the release arm64Channel publishes.
const arm64Version = "0.91.0"

// arm64Channel publishes, in a temporary release source trusted for the
// test, a release with only a linux/arm64 bundle (ployzd "arm64 daemon")
// and CLI ("arm64 cli"); it returns the channel and the version's
// directory.
func arm64Channel(t *testing.T) (ReleaseChannel, string) {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(nil)
	t.Cleanup(release.TrustForTest(key.Public().(ed25519.PublicKey)))
	const v = arm64Version
	root := t.TempDir()
	dir := filepath.Join(root, filepath.FromSlash(release.VersionDir("v0", v)))
	os.MkdirAll(dir, 0o755)
	bin := filepath.Join(t.TempDir(), "ployzd")
	os.WriteFile(bin, []byte("arm64 daemon"), 0o755)
	f, err := os.Create(filepath.Join(dir, release.BundleName(v, "linux", "arm64")))
	if err != nil {
		t.Fatal(err)
	}
	m := release.Manifest{Version: v, ProtocolMajor: version.ProtocolMajor, OS: "linux", Arch: "arm64"}
	if _, err := release.Write(f, m, []release.Source{{Path: "bin/ployzd", From: bin}}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.WriteFile(filepath.Join(dir, release.CLIName(v, "linux", "arm64")), []byte("arm64 cli"), 0o755)
	ix := release.Index{Version: v, ProtocolMajor: version.ProtocolMajor, Artifacts: []release.Artifact{
		{Name: release.BundleName(v, "linux", "arm64"), Kind: release.KindBundle, OS: "linux", Arch: "arm64"},
		{Name: release.CLIName(v, "linux", "arm64"), Kind: release.KindCLI, OS: "linux", Arch: "arm64"}}}
	if _, err := release.Publish(root, ix, key, []string{"stable"}); err != nil {
		t.Fatal(err)
	}
	return ReleaseChannel{Source: root, Channel: "stable"}, dir
}
