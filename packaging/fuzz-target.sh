#!/usr/bin/env bash
# fuzz-target.sh PKG TARGET FUZZTIME [go test flags...]: fuzz one target.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" at the -fuzztime boundary when the host is loaded
# (go.dev/issue/75804, fixed in Go 1.27): the deadline reaches the parent
# context before its workers' child context, and the coordinator reports
# its own shutdown as a failure. No input was found then, and none is
# written. A failure counts as a finding when the output says anything
# else or a new input appears in testdata/fuzz/TARGET; the bare deadline
# is printed, named, and the target runs once more so it still gets its
# fuzzing time.
set -uo pipefail
pkg=$1 target=$2 fuzztime=$3
shift 3
GO=${GO:-go}
corpus="$pkg/testdata/fuzz/$target"
count() { find "$corpus" -type f 2>/dev/null | wc -l; }

run() {
	local out=$1
	shift
	"$GO" test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" "$@" "$pkg" 2>&1 | tee "$out"
	return "${PIPESTATUS[0]}"
}

# toolchainRace: the run failed only with the coordinator's bare deadline.
toolchainRace() {
	local out=$1 before=$2
	[ "$(count)" -eq "$before" ] || return 1
	grep -q -- "--- FAIL: $target " "$out" || return 1
	# The failure's only message line is the coordinator's error.
	awk -v t="--- FAIL: $target " 'index($0, t) == 1 {f = 1; next} f && /^FAIL/ {exit} f {print}' "$out" |
		grep -v '^[[:space:]]*context deadline exceeded[[:space:]]*$' | grep -q . && return 1
	return 0
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for attempt in 1 2; do
	before=$(count)
	if run "$out" "$@"; then
		exit 0
	fi
	if [ "$attempt" = 1 ] && toolchainRace "$out" "$before"; then
		echo "fuzz: $pkg $target: the Go fuzz coordinator's shutdown race (go.dev/issue/75804: a bare 'context deadline exceeded', no input written); running it once more"
		continue
	fi
	exit 1
done
