#!/usr/bin/env bash
# make test's VM step, run after the container lab scenarios: TestVMLab on
# two QEMU VM Machines (own kernels) up to its partition/heal: a Cluster over
# kernel WireGuard, Containers reaching each other across the mesh under
# Docker's FORWARD DROP, a healthy ZFS pool on each. The power cycle and the
# volume scenarios are `make vm-test`'s (they would not fit).
#
# make test has 60 minutes on 2 cores. Measured here: the container part
# 31 min, this step 11-12 min with the VM image built, and 10-17 min more
# when it is not (the zfs module compiles). So the step runs when what is
# left of the budget covers it and says loudly when it does not.
#
# usage: vm-test-step.sh START_UNIX_SECONDS BIN_DIR
set -euo pipefail
start=$1 bin=$2
budget=${PLOYZ_TEST_BUDGET_MIN:-60}
PLOYZ_PREREQ_VM=1 "$(dirname "$0")/prereq.sh"

need=15
if image=$("$bin/ployz-lab" image --vm --cached 2>/dev/null); then
  state="built ($image)"
else
  state="not built"
  need=$((need + 20))
fi
left=$((budget - ($(date +%s) - start) / 60))
if [ "$left" -lt "$need" ]; then
  echo "make test: VM scenarios NOT RUN: $left of the $budget minutes are left and they need about $need (VM image $state)." >&2
  echo "make test: run them with \`make vm-lab-test\` (\`ployz-lab image --vm\` builds the image ahead)." >&2
  exit 0
fi
echo "make test: VM scenarios with $left of $budget minutes left (VM image $state)"
PLOYZ_LAB=1 PLOYZ_LAB_VM=1 PLOYZ_BIN_DIR="$bin" exec go test -count=1 -timeout "$((left - 1))m" -v \
  -run '^TestVMLab$/^(cluster|kernel-wireguard|containers-across-mesh|zfs|partition-heal)$' ./e2e/
