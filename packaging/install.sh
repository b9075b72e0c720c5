#!/bin/sh
# Installs the Ployz CLI for this computer from a Ployz release source
# (docs/releases.md). POSIX sh; needs curl or wget (or a local source),
# and sha256sum or shasum.
#
#   curl -fsSL https://SOURCE/install.sh | sh
#   sh install.sh --source URL|DIR [--channel stable] [--dir /usr/local/bin]
#
# The CLI's digest is checked against the release's SHA256SUMS. That file
# comes from the same source: the check catches a broken download, not a
# hostile server. The release's signature is what proves origin:
# `ployz self-update` and every install the CLI does verify it with the
# keys the CLI carries; to check this first CLI too, compare the
# SHA256SUMS line with one from a copy you trust.
set -eu

SOURCE="${PLOYZ_RELEASE_SOURCE:-@SOURCE@}"
CHANNEL="${PLOYZ_CHANNEL:-stable}"
LINE="${PLOYZ_LINE:-v0}"
DIR="${PLOYZ_INSTALL_DIR:-/usr/local/bin}"

while [ $# -gt 0 ]; do
	case "$1" in
	--source) SOURCE="$2"; shift 2 ;;
	--channel) CHANNEL="$2"; shift 2 ;;
	--dir) DIR="$2"; shift 2 ;;
	*) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

fail() { echo "install.sh: $*" >&2; exit 1; }

case "$SOURCE" in
"" | @SOURCE@) fail "no release source: pass --source URL|DIR or set PLOYZ_RELEASE_SOURCE" ;;
esac

# fetch REL DEST copies REL of the source to DEST.
fetch() {
	case "$SOURCE" in
	http://* | https://*)
		if command -v curl >/dev/null 2>&1; then
			curl -fsSL "$SOURCE/$1" -o "$2"
		elif command -v wget >/dev/null 2>&1; then
			wget -qO "$2" "$SOURCE/$1"
		else
			fail "neither curl nor wget is installed"
		fi ;;
	*) cp "${SOURCE#file://}/$1" "$2" ;;
	esac
}

case "$(uname -s)" in
Linux) os=linux ;;
Darwin) os=darwin ;;
*) fail "this computer runs $(uname -s); the CLI is built for Linux and macOS" ;;
esac
case "$(uname -m)" in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) fail "this computer's CPU is $(uname -m) (uname -m); the CLI is built for x86_64 and arm64" ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fetch "$LINE/$CHANNEL" "$tmp/version" || fail "no channel $LINE/$CHANNEL at $SOURCE"
version=$(head -n 1 "$tmp/version" | tr -d ' \r')
case "$version" in
"" | *[!0-9A-Za-z._+-]*) fail "channel $LINE/$CHANNEL names no valid version" ;;
esac
name="ployz-cli-$version-$os-$arch"
fetch "$LINE/$version/$name" "$tmp/ployz" || fail "release $version has no $name"
fetch "$LINE/$version/SHA256SUMS" "$tmp/SHA256SUMS" || fail "release $version has no SHA256SUMS"

want=$(awk -v n="$name" '$2 == n { print $1 }' "$tmp/SHA256SUMS")
[ -n "$want" ] || fail "SHA256SUMS of $version does not list $name"
if command -v sha256sum >/dev/null 2>&1; then
	got=$(sha256sum "$tmp/ployz" | awk '{print $1}')
else
	got=$(shasum -a 256 "$tmp/ployz" | awk '{print $1}')
fi
[ "$got" = "$want" ] || fail "$name: sha256 is $got, SHA256SUMS says $want"

chmod 0755 "$tmp/ployz"
if [ -w "$DIR" ]; then
	mv "$tmp/ployz" "$DIR/ployz"
else
	echo "install.sh: $DIR is not writable; using sudo" >&2
	sudo mv "$tmp/ployz" "$DIR/ployz"
fi
echo "installed ployz $version ($os/$arch) as $DIR/ployz"
