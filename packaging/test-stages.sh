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
# STAGE+STAGE... runs stages at once: the first in the foreground, the
# others in the background with their output in bin/STAGE.log, printed
# when all of them have ended. make test runs the VM scenarios beside the
# light container scenarios this way (lab-light+vm-step): those mostly
# wait on timers and the network and hold on a loaded host, so the
# TCG-emulated VMs use the CPU they leave idle and the two stages no
# longer add up. (Beside the heavy scenarios at nice 19 the VMs starved:
# ployzd took over 3 minutes to open its socket.)
#
# usage: test-stages.sh STAGE[+STAGE...]...
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
  make --no-print-directory "$stage" TEST_START="$start"
  rc=$?
  record "$stage" $(($(date +%s) - t0)) "$rc"
  return "$rc"
}

# run_group FIRST OTHER...: OTHER stages start in the background (their
# end time and status in bin/STAGE.rc), then FIRST runs here; the group
# waits for every stage and prints the background logs. FIRST's output
# is copied to bin/FIRST.log too: a background stage may wait for a line
# of it (vm-step waits until the container scenarios' images are built,
# so the two never build the same image at once); bin/FIRST.done says it
# ended.
run_group() {
  local first=$1 t0 s rc=0
  shift
  t0=$(date +%s)
  rm -f "bin/$first.done"
  logs+=("bin/$first.log")
  for s in "$@"; do
    echo "== make test: $s (at $(fmt_secs $((t0 - start))), in the background, log bin/$s.log)"
    rm -f "bin/$s.rc"
    logs+=("bin/$s.log")
    (
      make --no-print-directory "$s" TEST_START="$start" AFTER_LOG="$PWD/bin/$first.log" >"bin/$s.log" 2>&1
      echo "$? $(date +%s)" >"bin/$s.rc"
    ) &
  done
  echo "== make test: $first (at $(fmt_secs $((t0 - start))))"
  make --no-print-directory "$first" TEST_START="$start" 2>&1 | tee "bin/$first.log"
  rc=${PIPESTATUS[0]}
  touch "bin/$first.done"
  record "$first" $(($(date +%s) - t0)) "$rc"
  wait
  for s in "$@"; do
    local end code
    read -r code end <"bin/$s.rc" || { code=1 end=$(date +%s); }
    echo
    echo "== make test: $s's output (bin/$s.log)"
    cat "bin/$s.log"
    record "$s" $((end - t0)) "$code"
    [ "$code" -eq 0 ] || rc=1
  done
  return "$rc"
}

mkdir -p bin
for stage in "$@"; do
  if [[ $stage == *+* ]]; then
    IFS=+ read -ra group <<<"$stage"
    run_group "${group[@]}"
    continue
  fi
  if ! run_stage "$stage"; then
    case $stage in prereq | build) break ;; esac
  fi
done

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
