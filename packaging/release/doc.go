// Command release builds the release artifacts `make release` ships from
// binaries the Makefile compiled into dist/linux-<arch>/: the bundle
// ployz-<version>-linux-<arch>.tar.gz (core/release) that `ployz machine
// upgrade` pushes, and a .deb per arch for Debian and Ubuntu servers (nfpm,
// used as a library). It is its own module so nfpm's dependencies stay out
// of the daemon's and the CLI's go.mod.
package main
