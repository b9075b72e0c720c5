#!/usr/bin/env bash
# Installs and starts what `make demo` and `make test` need on a Debian
# machine: Docker (Debian's docker.io), debootstrap, iproute2, iptables and
# an SSH client (for `ployz lab ssh`), and Chromium (the dashboard's
# browser tests drive it headless; they skip where it is missing).
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
command -v chromium >/dev/null 2>&1 || need+=(chromium)
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
if ! docker info >/dev/null 2>&1; then
  if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; then
    systemctl start docker
  else
    echo "prereq: starting dockerd (log: /var/log/ployz-dockerd.log)"
    setsid nohup dockerd >/var/log/ployz-dockerd.log 2>&1 </dev/null &
  fi
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  if ! docker info >/dev/null 2>&1; then
    echo "prereq: dockerd did not answer within 30 s; last lines of its log:" >&2
    tail -n 20 /var/log/ployz-dockerd.log >&2 || true
    exit 1
  fi
fi
