package main

import (
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
	"github.com/ployz/ployz/core/version"
)

func main() {
	v := flag.String("version", "", "release version")
	dist := flag.String("dist", "dist", "output directory; binaries are read from dist/linux-<arch>")
	units := flag.String("units", "../systemd", "directory of the systemd units")
	arches := flag.String("arch", "amd64,arm64", "comma-separated linux arches")
	deb := flag.Bool("deb", true, "also build a .deb per arch")
	flag.Parse()
	if err := run(*v, *dist, *units, strings.Split(*arches, ","), *deb); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(v, dist, units string, arches []string, deb bool) error {
	if err := release.ValidVersion(v); err != nil {
		return fmt.Errorf("--version: %w", err)
	}
	unitFiles, err := filepath.Glob(filepath.Join(units, "*.service"))
	if err != nil || len(unitFiles) == 0 {
		return fmt.Errorf("--units %s: no *.service files", units)
	}
	for _, a := range arches {
		bins := filepath.Join(dist, "linux-"+a)
		srcs, err := sources(bins, unitFiles)
		if err != nil {
			return err
		}
		out := filepath.Join(dist, release.BundleName(v, "linux", a))
		if err := writeBundle(out, v, a, srcs); err != nil {
			return err
		}
		fmt.Println(out)
		if deb {
			p, err := writeDeb(dist, v, a, srcs)
			if err != nil {
				return err
			}
			fmt.Println(p)
		}
	}
	return nil
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

// writeDeb packages the same files for dpkg: binaries where the units
// expect them, units under /lib/systemd/system.
func writeDeb(dist, v, arch string, srcs []release.Source) (string, error) {
	var contents files.Contents
	for _, s := range srcs {
		dst := "/usr/local/bin/" + filepath.Base(s.Path)
		if strings.HasPrefix(s.Path, "systemd/") {
			dst = "/lib/systemd/system/" + filepath.Base(s.Path)
		}
		contents = append(contents, &files.Content{Source: s.From, Destination: dst,
			FileInfo: &files.ContentFileInfo{Mode: os.FileMode(s.Mode), Owner: "root", Group: "root"}})
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name: "ployz", Arch: arch, Platform: "linux", Version: debVersion(v), VersionSchema: "none",
		Maintainer: "Ployz <hello@ployz.sh>", Homepage: "https://ployz.sh", License: "Apache-2.0",
		Description:  "Ployz Machine daemon, replicated store and plugins",
		Overridables: nfpm.Overridables{Contents: contents, Depends: []string{"systemd"}, Recommends: []string{"docker.io | docker-ce"}},
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
