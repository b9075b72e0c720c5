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
# &STAGE starts a stage in the background (output in bin/STAGE.log, printed
# by the next `wait`) while the stages after it run; `wait` waits for every
# background stage. make test runs the VM step this way beside lint, the
# short fuzz pass and the light container scenarios (&vm-step lint
# fuzz-short lab-light wait): the fuzz pass runs for a fixed time whatever
# CPU it gets, lint has minutes to spare there, and the light scenarios mostly wait on timers and the network and
# hold on a loaded host, so the TCG-emulated VMs use the CPU they leave.
# The heavy scenarios run alone after the wait. (Beside the whole container
# stage at nice 19 the VMs starved: ployzd did not open its socket within
# 3 minutes.) Every stage's output is also kept in bin/STAGE.log, for the
# list of failed tests printed last.
#
# usage: test-stages.sh [&]STAGE|wait...
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
export TEST_START=$start
summary=() failed=() logs=()

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# record STAGE SECONDS RC adds a stage's line to the summary.
record() {
  local verdict=ok
  if [ "$3" -ne 0 ]; then verdict="FAILED (exit $3)"; failed+=("$1"); fi
  summary+=("$(printf '%-14s %8s  %s' "$1" "$(fmt_secs "$2")" "$verdict")")
}

run_stage() {
  local stage=$1 t0 rc
  t0=$(date +%s)
  echo "== make test: $stage (at $(fmt_secs $((t0 - start))))"
  logs+=("bin/$stage.log")
  make --no-print-directory "$stage" TEST_START="$start" 2>&1 | tee "bin/$stage.log"
  rc=${PIPESTATUS[0]}
  record "$stage" $(($(date +%s) - t0)) "$rc"
  return "$rc"
}

# start_background STAGE runs STAGE in the background; its status and end
# time go to bin/STAGE.rc.
background=() bg_start=()
start_background() {
  local stage=$1 t0
  t0=$(date +%s)
  echo "== make test: $stage (at $(fmt_secs $((t0 - start))), in the background, log bin/$stage.log)"
  rm -f "bin/$stage.rc"
  logs+=("bin/$stage.log")
  background+=("$stage") bg_start+=("$t0")
  (
    make --no-print-directory "$stage" TEST_START="$start" >"bin/$stage.log" 2>&1
    echo "$? $(date +%s)" >"bin/$stage.rc"
  ) &
}

# wait_background waits for every background stage, prints its output
# and records it.
wait_background() {
  local i code end
  echo "== make test: waiting for ${background[*]} (at $(fmt_secs $(($(date +%s) - start))))"
  wait
  for i in "${!background[@]}"; do
    read -r code end <"bin/${background[$i]}.rc" || { code=1 end=$(date +%s); }
    echo
    echo "== make test: ${background[$i]}'s output (bin/${background[$i]}.log)"
    cat "bin/${background[$i]}.log"
    record "${background[$i]}" $((end - bg_start[i])) "$code"
  done
  background=() bg_start=()
}

mkdir -p bin
for stage in "$@"; do
  case $stage in
  wait) wait_background ;;
  \&*) start_background "${stage#&}" ;;
  *)
    if ! run_stage "$stage"; then
      case $stage in prereq | build) break ;; esac
    fi
    ;;
  esac
done
[ "${#background[@]}" -eq 0 ] || wait_background

echo
echo "== make test: stage timings"
printf '%s\n' "${summary[@]}"
echo "$(printf '%-14s %8s' total "$(fmt_secs $(($(date +%s) - start)))")"
# The failed tests of every stage, last: a CI log shows its tail.
if [ "${#failed[@]}" -gt 0 ] && [ "${#logs[@]}" -gt 0 ]; then
  echo
  echo "== make test: failed tests in ${logs[*]}"
  grep -h -E -- '^\s*--- FAIL|^FAIL\s' "${logs[@]}" 2>/dev/null | head -40 || true
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "make test: FAILED: ${failed[*]}"
  exit 1
fi
echo "make test: every stage passed"
