#!/usr/bin/env bash
# The main job on one host: a 3-Machine lab, formed into a Cluster with the
# real enrollment path (SSH, mesh, store), then the example app deployed.
# Run through `make demo`, which builds bin/ first.
set -euo pipefail
cd "$(dirname "$0")/.."
ployz=bin/ployz
ctx=ployz-lab

$ployz lab down >/dev/null 2>&1 || true
$ployz ctx rm "$ctx" >/dev/null 2>&1 || true
$ployz lab up -n 3

key=$($ployz lab ls --json | sed -n 's/.*"state_dir": "\(.*\)".*/\1/p')/id_ed25519
ips=($($ployz lab ls --json | sed -n 's/.*"ip": "\(.*\)".*/\1/p'))

echo
echo "== forming a Cluster over SSH =="
$ployz --ssh-key "$key" --context "$ctx" machine init "root@${ips[0]}" --name m1 >/dev/null
for i in 1 2; do
  $ployz --ssh-key "$key" --context "$ctx" machine add "root@${ips[$i]}" --name "m$((i+1))" >/dev/null
done
$ployz --ssh-key "$key" --context "$ctx" machine ls

if $ployz deploy --help >/dev/null 2>&1; then
  echo
  echo "== deploying examples/hello =="
  $ployz --context "$ctx" deploy -f examples/hello/compose.yaml -y
  $ployz --context "$ctx" ps -p hello
  for ip in "${ips[@]}"; do
    if curl -fsS --max-time 2 "http://$ip:18082/" >/dev/null 2>&1; then
      echo
      echo "hello's store answers on its host port: curl http://$ip:18082/"
    fi
  done
  for i in 1 2 3 4 5 6 7 8 9 10; do
    curl -fsS --max-time 2 -H 'Host: hello.example.test' "http://${ips[0]}/" >/dev/null 2>&1 && break
    sleep 1
  done
  echo
  echo "hello's web answers through the ingress of every Machine, by hostname:"
  for ip in "${ips[@]}"; do
    echo "  curl -H 'Host: hello.example.test' http://$ip/"
  done
fi

cat <<TXT

The lab is up and formed into a Cluster (context "$ctx").
  bin/ployz lab ls                          Machines and their lab addresses
  bin/ployz lab ssh m1                      root shell on m1 (the lab's key)
  bin/ployz machine ls                      the Cluster as m1 observes it (context $ctx)
  bin/ployz ps -p hello                     the example's Containers
  bin/ployz lab down                        remove everything
TXT
