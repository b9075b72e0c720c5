#!/usr/bin/env bash
# make test's driver: runs the stages named on the command line in order
# and prints how long each took at the end, so a slow stage shows up in
# every CI log. A failed prereq or build stops the run (nothing after it
# can pass); any other failed stage is reported and the rest still run, so
# one CI run lists every failure. Exits non-zero when any stage failed.
#
# While the unit and container stages run, the VM image builds in the
# background (stage vm-image: `ployz-lab image --vm`, its log in
# bin/vm-image.log); vm-step waits for it.
#
# usage: test-stages.sh STAGE...
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
export TEST_START=$start
summary=() failed=()

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

run_stage() {
  local stage=$1 t0 rc
  t0=$(date +%s)
  echo "== make test: $stage (at $(fmt_secs $((t0 - start))))"
  make --no-print-directory "$stage" TEST_START="$start"
  rc=$?
  local took=$(($(date +%s) - t0)) verdict=ok
  if [ "$rc" -ne 0 ]; then verdict="FAILED (exit $rc)"; failed+=("$stage"); fi
  summary+=("$(printf '%-14s %8s  %s' "$stage" "$(fmt_secs "$took")" "$verdict")")
  return "$rc"
}

for stage in "$@"; do
  if ! run_stage "$stage"; then
    case $stage in prereq | build) break ;; esac
  fi
done

echo
echo "== make test: stage timings"
printf '%s\n' "${summary[@]}"
echo "$(printf '%-14s %8s' total "$(fmt_secs $(($(date +%s) - start)))")"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "make test: FAILED: ${failed[*]}"
  exit 1
fi
echo "make test: every stage passed"
