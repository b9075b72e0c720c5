#!/usr/bin/env bash
# make test's vm-image stage: installs the VM prerequisites, then builds the
# VM Machine image in the background (the slow part, the zfs module, is
# cached per recipe) while the unit and container stages run. vm-step
# waits for it: BIN_DIR/vm-image.rc holds the build's exit status once it
# ends, BIN_DIR/vm-image.log its output.
#
# usage: vm-image-start.sh BIN_DIR
set -euo pipefail
bin=$1
PLOYZ_PREREQ_VM=1 "$(dirname "$0")/prereq.sh"
rm -f "$bin/vm-image.rc"
if image=$("$bin/ployz-lab" image --vm --cached 2>/dev/null); then
  echo "vm-image: already built ($image)"
  echo 0 >"$bin/vm-image.rc"
  exit 0
fi
echo "vm-image: building in the background (log: $bin/vm-image.log)"
setsid bash -c '"$1/ployz-lab" image --vm >"$1/vm-image.log" 2>&1; echo $? >"$1/vm-image.rc.tmp"; mv "$1/vm-image.rc.tmp" "$1/vm-image.rc"' _ "$bin" </dev/null >/dev/null 2>&1 &
