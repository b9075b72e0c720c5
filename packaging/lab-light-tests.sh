#!/usr/bin/env bash
# Prints a go test -run pattern for the light lab scenarios: the Test
# functions in e2e/ that call needLightLab (they tolerate a loaded host and
# run beside other scenarios). make test runs the others first, one at a
# time, then these beside the VM scenarios (Makefile lab-heavy, lab-light).
#
# usage: lab-light-tests.sh [E2E_DIR]
set -euo pipefail
dir=${1:-$(dirname "$0")/../e2e}
names=$(awk '
  /^func Test[A-Za-z0-9_]+\(t \*testing\.T\)/ { name = $2; sub(/\(.*/, "", name) }
  /^\tneedLightLab\(t\)/ && name != "" { print name; name = "" }
  /^}/ { name = "" }
' "$dir"/*_test.go | sort -u | paste -sd'|')
if [ -z "$names" ]; then
  echo "lab-light-tests.sh: no Test in $dir calls needLightLab" >&2
  exit 1
fi
echo "^($names)\$"
