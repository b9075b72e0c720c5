#!/usr/bin/env bash
# The main job on one host: a 3-Machine lab, formed into a Cluster with the
# real enrollment path (SSH, mesh, store), then the example app deployed
# and checked through the ingress of every Machine. Run through `make
# demo`, which builds bin/ first. It can run any number of times in a row:
# each run removes the previous lab and its context, and `lab up` pins the
# new Machines' SSH host keys (read through Docker) in place of the old.
#
# PLOYZ_BIN_DIR (default bin), PLOYZ_DEMO_LAB (lab and context name,
# default ployz-lab) and PLOYZ_DEMO_MACHINES (default 3) let a test run
# the same path beside other labs.
set -euo pipefail
cd "$(dirname "$0")/.."
ployz=${PLOYZ_BIN_DIR:-bin}/ployz
name=${PLOYZ_DEMO_LAB:-ployz-lab}
n=${PLOYZ_DEMO_MACHINES:-3}
ctx=$name
host=hello.example.test

$ployz lab down --name "$name" >/dev/null 2>&1 || true
$ployz ctx rm "$ctx" >/dev/null 2>&1 || true
$ployz lab up --name "$name" -n "$n"

json=$($ployz lab ls --name "$name" --json)
key=$(sed -n 's/.*"state_dir": "\(.*\)".*/\1/p' <<<"$json")/id_ed25519
mapfile -t ips < <(sed -n 's/.*"ip": "\(.*\)".*/\1/p' <<<"$json")

echo
echo "== forming a Cluster over SSH =="
$ployz --ssh-key "$key" --context "$ctx" machine init "root@${ips[0]}" --name m1 >/dev/null
for ((i = 1; i < ${#ips[@]}; i++)); do
  $ployz --ssh-key "$key" --context "$ctx" machine add "root@${ips[$i]}" --name "m$((i + 1))" >/dev/null
done
$ployz --ssh-key "$key" --context "$ctx" machine ls

echo
echo "== deploying examples/hello =="
$ployz --context "$ctx" deploy -f examples/hello/compose.yaml -y
$ployz --context "$ctx" ps -p hello

# answers URL [curl args...]: the body, once the URL has answered within
# a minute; the deploy has returned, but an ingress loads its routes from
# the store as they replicate.
answers() {
  local url=$1 body
  shift
  for _ in $(seq 1 60); do
    if body=$(curl -fsS --max-time 2 "$@" "$url" 2>/dev/null); then
      echo "$body"
      return 0
    fi
    sleep 1
  done
  return 1
}

echo
echo "hello's web answers through the ingress of every Machine, by hostname:"
for ip in "${ips[@]}"; do
  if ! body=$(answers "http://$ip/" -H "Host: $host"); then
    echo "demo: hello's web did not answer through the ingress of $ip within a minute: curl -H 'Host: $host' http://$ip/" >&2
    exit 1
  fi
  echo "  curl -H 'Host: $host' http://$ip/    -> $(head -c 80 <<<"$body" | head -n 1)"
done
store=
for ip in "${ips[@]}"; do
  if curl -fsS --max-time 2 "http://$ip:18082/" >/dev/null 2>&1; then
    store=$ip
  fi
done
if [ -z "$store" ]; then
  echo "demo: hello's store answers on no Machine's host port 18082" >&2
  exit 1
fi
echo "hello's store answers on its host port: curl http://$store:18082/"

echo
echo "The lab is up and formed into a Cluster (context \"$ctx\")."
row() { printf '  %-46s %s\n' "$1" "$2"; }
row "$ployz lab --name $name ls" "Machines and their lab addresses"
row "$ployz lab --name $name ssh m1" "root shell on m1 (the lab's key)"
row "$ployz --context $ctx machine ls" "the Cluster as m1 observes it"
row "$ployz --context $ctx ps -p hello" "the example's Containers"
row "$ployz lab --name $name down" "remove everything (and the lab's host-key pins)"
