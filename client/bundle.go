package client

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/internal/version"
)

// OwnBundle is the name of the release bundle of this program's version
// for linux Machines of its architecture.
func OwnBundle() string { return release.BundleName(version.Version, "linux", runtime.GOARCH) }

// BundlePath is the bundle a rollout pushes: named, else OwnBundle in
// dir (beside the program), which must exist.
func BundlePath(named, dir string) (string, error) {
	if named != "" {
		return named, nil
	}
	p := filepath.Join(dir, OwnBundle())
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("--bundle: no %s beside this CLI; pass --bundle FILE (`make release` builds them into dist/)", OwnBundle())
	}
	return p, nil
}

// OpenBundle reads the manifest of the bundle at p, refusing one of
// another protocol major: an upgrade never crosses one.
func OpenBundle(p string) (*release.Manifest, error) {
	m, err := release.OpenManifest(p)
	if err != nil {
		return nil, fmt.Errorf("--bundle %s: %w", p, err)
	}
	if m.ProtocolMajor != version.ProtocolMajor {
		return nil, fmt.Errorf("--bundle %s: protocol_major is %d, this CLI speaks %d; an upgrade never crosses a protocol major", p, m.ProtocolMajor, version.ProtocolMajor)
	}
	return m, nil
}

// OpenSignedBundle opens the bundle file at p (OpenBundle) once a release
// key this build trusts signed it: p.sig beside it, or the signed
// release.json of its directory listing it (release.VerifyBundleFile).
// keyID names the key that signed.
func OpenSignedBundle(p string) (b release.Bundle, keyID string, err error) {
	proof, keyID, err := release.VerifyBundleFile(p)
	if err != nil {
		return b, "", err
	}
	m, err := OpenBundle(p)
	if err != nil {
		return b, "", err
	}
	return release.Bundle{Path: p, Manifest: m, Proof: proof}, keyID, nil
}

// InstallDir is where enrolling takes the binaries it installs on a
// Machine without Ployz: OwnBundle in dir, refused unless a trusted
// release key signed it, unpacked into a temporary directory with every
// digest verified, plus self (this program's binary, "" for none) when
// it runs on linux; without a bundle, the loose binaries in dir (a
// development build, as in the lab: the same build as this CLI), said so
// through progress. cleanup removes the temporary directory.
func InstallDir(dir, self string, progress func(string, ...any)) (bin string, cleanup func(), err error) {
	none := func() {}
	p, err := BundlePath("", dir)
	if err != nil {
		progress("no release bundle %s beside the CLI: installing the loose binaries of %s (a development build; `make release` builds bundles)", OwnBundle(), dir)
		return dir, none, nil
	}
	_, keyID, err := release.VerifyBundleFile(p)
	if err != nil {
		return "", none, err
	}
	tmp, err := os.MkdirTemp("", "ployz-install-")
	if err != nil {
		return "", none, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	m, err := extract(p, filepath.Join(tmp, "r"))
	if err != nil {
		cleanup()
		return "", none, err
	}
	bin = filepath.Join(tmp, "r", "bin")
	if self != "" && runtime.GOOS == "linux" {
		if b, err := os.ReadFile(self); err == nil {
			_ = os.WriteFile(filepath.Join(bin, "ployz"), b, 0o755)
		}
	}
	progress("installing Ployz %s from %s, signed by key %s", m.Version, p, keyID)
	return bin, cleanup, nil
}

// extract unpacks the bundle at p into dir for this program's Machines.
func extract(p, dir string) (*release.Manifest, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := release.Extract(f, dir, release.Target{OS: "linux", Arch: runtime.GOARCH, ProtocolMajor: version.ProtocolMajor})
	if err != nil {
		return nil, fmt.Errorf("install from %s: %w", p, err)
	}
	return m, nil
}
