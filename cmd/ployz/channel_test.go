package main

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/internal/version"
)

// publishCLI publishes version v, holding a CLI for this computer, into
// the release source root under channel stable, signed by key.
func publishCLI(t *testing.T, root, v string, key ed25519.PrivateKey) string {
	t.Helper()
	dir := filepath.Join(root, filepath.FromSlash(release.VersionDir(release.Line(v), v)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := release.CLIName(v, runtime.GOOS, runtime.GOARCH)
	if err := os.WriteFile(filepath.Join(dir, name), []byte("cli "+v), 0o755); err != nil {
		t.Fatal(err)
	}
	ix := release.Index{Version: v, ProtocolMajor: version.ProtocolMajor,
		Artifacts: []release.Artifact{{Name: name, Kind: release.KindCLI, OS: runtime.GOOS, Arch: runtime.GOARCH}}}
	if _, err := release.Publish(root, ix, key, []string{"stable"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func testKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSelfUpdateRefusals: self-update from a local release source names
// the file and the key of each refusal (another key, no signature, a
// tampered CLI, a v1 release on this v0 CLI's channel) and leaves no
// download beside the CLI; the channel's own version is "already".
func TestSelfUpdateRefusals(t *testing.T) {
	t.Setenv(operator.EnvPath, filepath.Join(t.TempDir(), "operator.db"))
	t.Setenv(operator.EnvContext, "")
	key, other := testKey(t), testKey(t)
	exe, _ := os.Executable()
	check := func(what, root string, names ...string) {
		t.Helper()
		_, errs, code := cli(t, nil, "self-update", "--release-source", root)
		if code == 0 {
			t.Fatalf("%s: accepted", what)
		}
		for _, n := range names {
			if !strings.Contains(errs, n) {
				t.Errorf("%s: %q does not name %q", what, errs, n)
			}
		}
		if _, err := os.Stat(exe + ".new"); !os.IsNotExist(err) {
			t.Errorf("%s: a refused download was left beside the CLI", what)
		}
	}
	const v = "0.91.0"
	pub := func(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

	root := t.TempDir()
	dir := publishCLI(t, root, v, key)
	index := filepath.Join(dir, release.IndexName)
	restore := release.TrustForTest(pub(other))
	check("another key", root, index, release.KeyID(pub(key)), release.KeyID(pub(other)))
	restore()
	defer release.TrustForTest(pub(key))()

	cliFile := filepath.Join(dir, release.CLIName(v, runtime.GOOS, runtime.GOARCH))
	os.WriteFile(cliFile, []byte("cli 0.91.X"), 0o755)
	check("tampered CLI", root, release.CLIName(v, runtime.GOOS, runtime.GOARCH), release.KeyID(pub(key)), "sha256")

	os.Remove(index + release.SigSuffix)
	check("unsigned", root, index, "unsigned")

	v1 := t.TempDir()
	publishCLI(t, v1, "1.0.0", key)
	if err := os.CopyFS(filepath.Join(v1, "v0", "1.0.0"), os.DirFS(filepath.Join(v1, "v1", "1.0.0"))); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(v1, "v0", "stable"), []byte("1.0.0\n"), 0o644)
	check("v1 on a v0 channel", v1, "1.0.0", "v1")

	if release.ValidVersion(version.Version) == nil {
		same := t.TempDir()
		publishCLI(t, same, version.Version, key)
		out, errs, code := cli(t, nil, "self-update", "--release-source", same, "--json")
		var r struct{ Updated bool }
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Updated {
			t.Fatalf("up to date: %q %q exit %d", out, errs, code)
		}
	}
	if _, errs, code := cli(t, nil, "self-update"); code == 0 || !strings.Contains(errs, "--release-source") {
		t.Errorf("no source: exit %d %q", code, errs)
	}
}

// TestCtxRelease: ctx release saves, shows (--json) and clears a
// context's release source; a channel without a source is refused.
func TestCtxRelease(t *testing.T) {
	twoContexts(t).Close()
	if _, errs, code := cli(t, nil, "ctx", "release", "--channel", "edge"); code == 0 || !strings.Contains(errs, "--release-source") {
		t.Fatalf("channel without source: exit %d %q", code, errs)
	}
	if out, errs, code := cli(t, nil, "ctx", "release", "--release-source", "https://r.example/ployz", "--channel", "edge"); code != 0 || !strings.Contains(out, "https://r.example/ployz, channel edge") {
		t.Fatalf("set: %q %q exit %d", out, errs, code)
	}
	var got struct{ Context, Source, Channel string }
	out, _, _ := cli(t, nil, "ctx", "release", "--json")
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Context != "home" || got.Source != "https://r.example/ployz" || got.Channel != "edge" {
		t.Fatalf("show: %q %v", out, err)
	}
	if out, _, _ := cli(t, nil, "ctx", "release", "other"); !strings.Contains(out, "no release source") {
		t.Fatalf("another context shares the setting: %q", out)
	}
	if out, _, code := cli(t, nil, "ctx", "release", "--clear"); code != 0 || !strings.Contains(out, "no release source") {
		t.Fatalf("clear: %q exit %d", out, code)
	}
}
