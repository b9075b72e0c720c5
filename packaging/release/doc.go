// Command release writes one version into a Ployz release source
// (docs/releases.md) from the binaries the Makefile compiled into
// <build>/linux-<arch>/ and <build>/cli-<os>-<arch>/: per linux arch the
// bundle ployz-<version>-linux-<arch>.tar.gz (core/release) and a .deb
// (nfpm, used as a library), the CLI per os/arch, the install script,
// SHA256SUMS, the index release.json and its Ed25519 signature, then the
// channel pointers. It is its own module so nfpm's dependencies stay out
// of the daemon's and the CLI's go.mod.
package main
