#!/usr/bin/env bash
# Builds the lab Machine base image: Debian bookworm from debootstrap with
# Docker, systemd and SSH, imported with `docker import`. The lab library
# tags the result with the hash of this recipe, so it reruns only when the
# recipe changes.
#
# usage: base.sh IMAGE_TAG
set -euo pipefail
tag=${1:?usage: base.sh IMAGE_TAG}
here=$(cd "$(dirname "$0")" && pwd)
mirror=${PLOYZ_DEBIAN_MIRROR:-http://deb.debian.org/debian}

packages=$(grep -v '^#' "$here/packages.txt" | xargs | tr ' ' ',')
root=$(mktemp -d /var/tmp/ployz-lab-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT

echo "lab: debootstrap bookworm into $root (a few minutes, once per recipe change)"
debootstrap --variant=minbase --include="$packages" bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -n 30 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

# Machine configuration: copy the overlay (systemd units, docker and sshd
# settings), then the few steps that need the rootfs's own tools.
cp -a "$here/rootfs/." "$root/"
chroot "$root" /bin/sh -eu <<'CHROOT'
  # Units that cannot work inside a container: masked so the Machine boots clean.
  for u in getty@tty1.service console-getty.service systemd-udevd.service \
           systemd-udev-trigger.service systemd-modules-load.service \
           systemd-remount-fs.service sys-kernel-config.mount \
           sys-kernel-debug.mount sys-kernel-tracing.mount \
           systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer \
           e2scrub_all.timer fstrim.timer; do
    ln -sf /dev/null "/etc/systemd/system/$u"
  done
  systemctl enable docker.service ssh.service ployz-lab-hostkeys.service >/dev/null 2>&1
  # Each Machine gets its own identity at boot.
  rm -f /etc/ssh/ssh_host_* 
  : > /etc/machine-id
  rm -f /var/lib/dbus/machine-id
  install -d -m 0700 /root/.ssh
  apt-get clean
  rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/*
CHROOT

echo "lab: importing $tag"
tar -C "$root" --numeric-owner -c . | docker import \
  -c 'ENTRYPOINT ["/lib/systemd/systemd"]' \
  -c 'ENV container=docker' \
  - "$tag" >/dev/null
