#!/usr/bin/env bash
# Installs and starts what `make demo` and `make test` need on a Debian
# machine: Docker (Debian's docker.io), debootstrap, iproute2, iptables and
# an SSH client (for `ployz lab ssh`), curl (the demo checks the ingress),
# Chromium (the dashboard's browser tests drive it headless), and the C
# toolchain (gcc, libc6-dev) the race detector needs: `go test -race` builds
# with cgo, while every shipped binary stays static; BIND (bind9), the
# real DNS server the ingress's ACME DNS-01 tests update and Pebble asks;
# and protoc (Debian's protobuf-compiler), with which `make lint` checks
# the generated gRPC code.
# Idempotent and quiet when everything is present. Downloads only from
# Debian's package archive. With PLOYZ_PREREQ_VM=1 (`make vm-test`) also
# QEMU, qemu-img and debugfs for VM lab Machines.
set -euo pipefail

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
[ -e /usr/include/stdlib.h ] || need+=(libc6-dev)
command -v named >/dev/null 2>&1 || [ -x /usr/sbin/named ] || need+=(bind9)
if [ "${PLOYZ_PREREQ_VM:-}" = 1 ]; then
  command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
  command -v qemu-img >/dev/null 2>&1 || need+=(qemu-utils)
  command -v debugfs >/dev/null 2>&1 || need+=(e2fsprogs)
fi

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "prereq: missing ${need[*]}; run as root or install them with apt-get" >&2
    exit 1
  fi
  echo "prereq: installing ${need[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The lab builds Debian 13 Machines: debootstrap needs a trixie script and
# the keyring trixie's keys (Debian 12's current point release has both).
if [ ! -e /usr/share/debootstrap/scripts/trixie ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "prereq: upgrading debootstrap and debian-archive-keyring for Debian 13 lab Machines"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --only-upgrade debootstrap debian-archive-keyring >/dev/null
  fi
  if [ ! -e /usr/share/debootstrap/scripts/trixie ]; then
    echo "prereq: this debootstrap cannot install Debian 13 (trixie); install a newer debootstrap and debian-archive-keyring" >&2
    exit 1
  fi
fi

# A Docker daemon must answer. Start one when none does: through systemd
# when it is PID 1, otherwise as a background process with its own log.
# dockerd gives up when its containerd does not come up in time (a loaded
# host, or the containerd of a daemon that was just killed still holding
# its state), so a start is tried three times, each after clearing what the
# failed one left.
docker_answers() {
  for _ in $(seq 1 "$1"); do
    docker info >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
start_dockerd() {
  if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; then
    systemctl restart docker || true
    return
  fi
  pkill -x dockerd 2>/dev/null || true
  # the containerd dockerd manages runs with this config; a leftover one
  # keeps the next dockerd's containerd from starting
  pkill -f 'containerd --config /var/run/docker/containerd/containerd.toml' 2>/dev/null || true
  for _ in $(seq 1 20); do
    pgrep -x dockerd >/dev/null || pgrep -f 'containerd --config /var/run/docker/containerd' >/dev/null || break
    sleep 0.5
  done
  rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
  echo "prereq: starting dockerd (log: /var/log/ployz-dockerd.log)"
  echo "== $(date -u +%FT%TZ) prereq starts dockerd" >>/var/log/ployz-dockerd.log
  setsid nohup dockerd >>/var/log/ployz-dockerd.log 2>&1 </dev/null &
}
if ! docker info >/dev/null 2>&1; then
  for attempt in 1 2 3; do
    start_dockerd
    docker_answers 120 && break
    echo "prereq: dockerd did not answer within 60 s (attempt $attempt of 3); last lines of its log:" >&2
    tail -n 5 /var/log/ployz-dockerd.log >&2 || true
  done
  if ! docker info >/dev/null 2>&1; then
    echo "prereq: no Docker daemon answers after 3 starts; see /var/log/ployz-dockerd.log" >&2
    exit 1
  fi
fi
