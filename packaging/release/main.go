package main

import (
	"crypto/ed25519"
	"embed"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"

	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/internal/version"
)

func main() {
	v := flag.String("version", "", "release version")
	dist := flag.String("dist", "dist", "the release source directory: this version goes to <dist>/<line>/<version>/")
	build := flag.String("build", "dist/.build", "binaries the Makefile compiled: <build>/linux-<arch>/ and <build>/cli-<os>-<arch>/ployz")
	units := flag.String("units", "../systemd", "directory of the systemd units")
	arches := flag.String("arch", "amd64,arm64", "comma-separated linux arches")
	clis := flag.String("cli", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "comma-separated os/arch of the CLIs")
	deb := flag.Bool("deb", true, "also build a .deb per arch")
	script := flag.String("script", "../install.sh", "the install script put in the release")
	key := flag.String("key", "", "release signing key file (default: $"+release.EnvReleaseKey+")")
	channels := flag.String("channel", "edge", "comma-separated channels pointed at this version")
	flag.Parse()
	r := releaseRun{version: *v, dist: *dist, build: *build, units: *units, arches: split(*arches), clis: split(*clis),
		deb: *deb, script: *script, key: *key, channels: split(*channels)}
	if err := r.run(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// releaseRun is one `make release`: the artifacts of one version in the
// release source, then the signed index and the channel pointers.
type releaseRun struct {
	version, dist, build, units, script, key string
	arches, clis, channels                   []string
	deb                                      bool
}

func (r releaseRun) run() error {
	if err := release.ValidVersion(r.version); err != nil {
		return fmt.Errorf("--version: %w", err)
	}
	// The key first: a release that cannot be signed is not built.
	key, err := release.LoadPrivateKey(r.key)
	if err != nil {
		return err
	}
	unitFiles, err := filepath.Glob(filepath.Join(r.units, "*.service"))
	if err != nil || len(unitFiles) == 0 {
		return fmt.Errorf("--units %s: no *.service files", r.units)
	}
	out := filepath.Join(r.dist, release.Line(r.version), r.version)
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ix := release.Index{Version: r.version, ProtocolMajor: version.ProtocolMajor}
	for _, a := range r.arches {
		arts, err := r.linux(out, a, unitFiles)
		if err != nil {
			return err
		}
		ix.Artifacts = append(ix.Artifacts, arts...)
	}
	for _, t := range r.clis {
		goos, arch, _ := strings.Cut(t, "/")
		name := release.CLIName(r.version, goos, arch)
		if err := copyFile(filepath.Join(r.build, "cli-"+goos+"-"+arch, "ployz"), filepath.Join(out, name), 0o755); err != nil {
			return fmt.Errorf("CLI %s: %w", t, err)
		}
		ix.Artifacts = append(ix.Artifacts, release.Artifact{Name: name, Kind: release.KindCLI, OS: goos, Arch: arch})
	}
	if err := copyFile(r.script, filepath.Join(out, release.ScriptName), 0o755); err != nil {
		return fmt.Errorf("--script: %w", err)
	}
	ix.Artifacts = append(ix.Artifacts, release.Artifact{Name: release.ScriptName, Kind: release.KindScript})
	signed, err := release.Publish(r.dist, ix, key, r.channels)
	if err != nil {
		return err
	}
	// The newest install script also sits at the top, for `curl .../install.sh | sh`.
	if err := copyFile(r.script, filepath.Join(r.dist, release.ScriptName), 0o755); err != nil {
		return err
	}
	fmt.Printf("release %s (line %s, %d artifacts) signed by key %s in %s; channels %s\n",
		signed.Version, signed.Line, len(signed.Artifacts), release.KeyID(key.Public().(ed25519.PublicKey)), out, strings.Join(r.channels, ", "))
	return nil
}

// linux writes arch's bundle (and .deb) into out.
func (r releaseRun) linux(out, a string, unitFiles []string) ([]release.Artifact, error) {
	srcs, err := sources(filepath.Join(r.build, "linux-"+a), unitFiles)
	if err != nil {
		return nil, err
	}
	name := release.BundleName(r.version, "linux", a)
	if err := writeBundle(filepath.Join(out, name), r.version, a, srcs); err != nil {
		return nil, err
	}
	arts := []release.Artifact{{Name: name, Kind: release.KindBundle, OS: "linux", Arch: a}}
	if r.deb {
		p, err := writeDeb(out, r.version, a, srcs)
		if err != nil {
			return nil, err
		}
		arts = append(arts, release.Artifact{Name: filepath.Base(p), Kind: release.KindDeb, OS: "linux", Arch: a})
	}
	return arts, nil
}

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, mode)
}

// sources lists ployzd and every plugin binary in bins, and the units.
func sources(bins string, unitFiles []string) ([]release.Source, error) {
	var srcs []release.Source
	for _, b := range release.Binaries {
		p := filepath.Join(bins, b)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s: %w (the Makefile builds it)", p, err)
		}
		srcs = append(srcs, release.Source{Path: "bin/" + b, From: p, Mode: 0o755})
	}
	for _, u := range unitFiles {
		srcs = append(srcs, release.Source{Path: "systemd/" + filepath.Base(u), From: u, Mode: 0o644})
	}
	return srcs, nil
}

func writeBundle(out, v, arch string, srcs []release.Source) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	_, err = release.Write(f, release.Manifest{Version: v, ProtocolMajor: version.ProtocolMajor, OS: "linux", Arch: arch}, srcs)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return fmt.Errorf("bundle %s: %w", out, err)
	}
	return nil
}

// debVersion makes v acceptable to dpkg, which wants a leading digit
// (a `git describe --always` hash has none).
func debVersion(v string) string {
	if v != "" && unicode.IsDigit(rune(v[0])) {
		return v
	}
	return "0.0.0~" + v
}

// debScripts are the package's maintainer scripts (docs/releases.md, "The
// .deb"): postinst links /usr/local/bin to the package's binaries where
// nothing is yet, prerm stops Ployz, postrm removes those links.
//
//go:embed deb
var debScripts embed.FS

// DebBinDir is where the .deb puts the binaries: the package's own
// directory, which `machine upgrade` never writes.
const DebBinDir = "/usr/lib/ployz/bin/"

// writeDeb packages the same files for dpkg: binaries in DebBinDir (linked
// from /usr/local/bin, where the units run them, by postinst), units under
// /lib/systemd/system.
func writeDeb(dist, v, arch string, srcs []release.Source) (string, error) {
	scripts, err := writeScripts()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scripts)
	var contents files.Contents
	for _, s := range srcs {
		dst := DebBinDir + filepath.Base(s.Path)
		if strings.HasPrefix(s.Path, "systemd/") {
			dst = "/lib/systemd/system/" + filepath.Base(s.Path)
		}
		contents = append(contents, &files.Content{Source: s.From, Destination: dst,
			FileInfo: &files.ContentFileInfo{Mode: os.FileMode(s.Mode), Owner: "root", Group: "root"}})
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name: "ployz", Arch: arch, Platform: "linux", Version: debVersion(v), VersionSchema: "none",
		Maintainer: "Ployz <hello@ployz.sh>", Homepage: "https://ployz.sh", License: "Apache-2.0",
		Description: "Ployz Machine daemon, replicated store and plugins",
		Overridables: nfpm.Overridables{Contents: contents, Depends: []string{"systemd"}, Recommends: []string{"docker.io | docker-ce"},
			Scripts: nfpm.Scripts{PostInstall: filepath.Join(scripts, "postinst"), PreRemove: filepath.Join(scripts, "prerm"), PostRemove: filepath.Join(scripts, "postrm")}},
	})
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("deb %s: %w", arch, err)
	}
	out := filepath.Join(dist, pkg.ConventionalFileName(info))
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	err = pkg.Package(info, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return "", fmt.Errorf("deb %s: %w", arch, err)
	}
	return out, nil
}

// writeScripts copies the embedded maintainer scripts into a temporary
// directory for nfpm, which reads them by path.
func writeScripts() (string, error) {
	dir, err := os.MkdirTemp("", "ployz-deb-")
	if err != nil {
		return "", err
	}
	for _, n := range []string{"postinst", "prerm", "postrm"} {
		b, err := debScripts.ReadFile("deb/" + n)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, n), b, 0o755)
		}
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("deb script %s: %w", n, err)
		}
	}
	return dir, nil
}
