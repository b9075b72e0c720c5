#!/bin/sh
# Re-fetches the dashboard's one frontend dependency, uPlot (MIT), from npm
# into core/dashboard/ui/vendor. The files are committed, so building never
# needs the network; run this only to move to another uPlot release.
set -eu
version="${1:-1.6.32}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack "uplot@$version" >/dev/null
tar xzf "uplot-$version.tgz"
dst="$repo/core/dashboard/ui/vendor"
mkdir -p "$dst"
cp package/dist/uPlot.iife.min.js package/dist/uPlot.min.css "$dst/"
cp package/LICENSE "$dst/uPlot.LICENSE"
echo "uPlot $version" > "$dst/VERSION"
echo "vendored uPlot $version into $dst"
