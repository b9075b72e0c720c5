#!/usr/bin/env bash
# Builds a lab Machine base image: Debian SUITE (trixie or bookworm) from
# debootstrap with that release's own Docker (docker.io), systemd and SSH,
# imported with `docker import`. The lab library tags the result with the
# hash of this recipe and the suite, so it reruns only when either changes.
#
# The suite's packages come from the Debian mirror named by
# PLOYZ_DEBIAN_MIRROR (default deb.debian.org); only the new root's own
# sources.list names the suite, the host's apt sources are never touched.
#
# usage: base.sh SUITE IMAGE_TAG
set -euo pipefail
suite=${1:?usage: base.sh SUITE IMAGE_TAG}
tag=${2:?usage: base.sh SUITE IMAGE_TAG}
here=$(cd "$(dirname "$0")" && pwd)
mirror=${PLOYZ_DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ ! -e "/usr/share/debootstrap/scripts/$suite" ]; then
  echo "lab: this host's debootstrap does not know Debian $suite; install a newer debootstrap and debian-archive-keyring" >&2
  exit 1
fi

# Common packages, then the suite's own additions (package splits differ
# between releases).
lists=("$here/packages.txt")
[ -f "$here/packages-$suite.txt" ] && lists+=("$here/packages-$suite.txt")
packages=$(cat "${lists[@]}" | grep -v '^#' | xargs | tr ' ' ',')
root=$(mktemp -d /var/tmp/ployz-lab-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT

echo "lab: debootstrap $suite into $root (a few minutes, once per recipe change)"
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
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
  -c "LABEL ployz.lab.suite=$suite" \
  - "$tag" >/dev/null
