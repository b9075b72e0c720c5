#!/usr/bin/env bash
# Records the zfs/zpool session volume-zfs's unit test replays
# (plugins/volume-zfs/internal/zfsvol/testdata/zfs-session.json and
# zfs-session/): boots a 1-Machine VM lab (its fresh pool "ployz"), runs
# TestManagerAgainstRecordedZFS there as root against the real zfs, copies
# the recording into testdata/ and removes the lab. Run it after changing
# which commands Manager runs (`make record-zfs-session`, after `make
# build`); the VM image builds first when it is not cached (tens of
# minutes), booting takes minutes more under TCG.
#
# PLOYZ_BIN_DIR (default bin) holds ployz-lab and the binaries the VM image
# carries; PLOYZ_ZFSREC_LAB names the lab (default zfsrec).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PLOYZ_BIN_DIR:-bin}
lab=("$bin/ployz-lab" --name "${PLOYZ_ZFSREC_LAB:-zfsrec}")
pkg=plugins/volume-zfs/internal/zfsvol
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Static: the Machine's libc is not this host's.
CGO_ENABLED=0 go test -c -o "$tmp/zfsvol.test" "./$pkg"

"${lab[@]}" down >/dev/null 2>&1 || true
"${lab[@]}" up --vm -n 1 --bin-dir "$bin"
trap '"${lab[@]}" down; rm -rf "$tmp"' EXIT

"${lab[@]}" exec m1 -- sh -c 'cat >/root/zfsvol.test && chmod +x /root/zfsvol.test' <"$tmp/zfsvol.test"
"${lab[@]}" exec m1 -- sh -c 'rm -rf /root/rec && cd /root &&
  PLOYZ_ZFSDOUBLE_RECORD=/root/rec ./zfsvol.test -test.run "^TestManagerAgainstRecordedZFS$" -test.v -test.count=1'

rm -rf "$pkg/testdata/zfs-session.json" "$pkg/testdata/zfs-session"
"${lab[@]}" exec m1 -- tar -C /root/rec -cf - . | tar -C "$pkg/testdata" -xf - --no-same-owner
echo "recorded into $pkg/testdata:"
ls -l "$pkg/testdata/zfs-session.json" "$pkg/testdata/zfs-session"
