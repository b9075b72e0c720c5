#!/usr/bin/env bash
# Builds a lab VM image from a lab Machine base image (Debian 12): Debian's
# kernel (it ships wireguard.ko), initramfs-tools, udev, and ZFS (zfs-dkms
# from bookworm contrib, its module built here by dkms against the matching
# linux-headers), written to an ext4 image with `mkfs.ext4 -d`. Outputs
# OUT_DIR/{vmlinuz,initrd.img,rootfs.ext4}; the lab library names OUT_DIR
# by the hash of this recipe and the base image, so it reruns only when
# either changes.
#
# usage: vm.sh BASE_IMAGE OUT_DIR
set -euo pipefail
base=${1:?usage: vm.sh BASE_IMAGE OUT_DIR}
out=${2:?usage: vm.sh BASE_IMAGE OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mirror=${PLOYZ_DEBIAN_MIRROR:-http://deb.debian.org/debian}

root=$(mktemp -d /var/tmp/ployz-labvm-rootfs.XXXXXX)
cleanup() {
  for m in dev/pts dev proc sys; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf "$root"
}
trap cleanup EXIT

echo "labvm: unpacking $base"
ctr=$(docker create "$base")
docker export "$ctr" | tar -x -C "$root"
docker rm -f "$ctr" >/dev/null
# docker export leaves /.dockerenv: systemd would take the VM for a container.
rm -f "$root/.dockerenv"

mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Only this chroot's sources name contrib (zfs-dkms lives there).
echo "deb $mirror bookworm main contrib" > "$root/etc/apt/sources.list"
rm -f "$root/etc/apt/sources.list.d/"*
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
cp -a "$here/rootfs/." "$root/"

echo "labvm: installing kernel, udev and zfs-dkms (builds the zfs module: minutes, once per recipe change)"
chroot "$root" /bin/sh -eu >"$root.log" 2>&1 <<'CHROOT' || { tail -n 40 "$root.log" >&2; rm -f "$root.log"; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The overlay ships /etc/initramfs-tools/modules: keep ours, never ask.
  o="-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
  # apparmor: Debian's kernel enables it, and dockerd then needs
  # apparmor_parser to load its profile (a Debian server has it).
  apt-get install -y -qq $o --no-install-recommends linux-image-amd64 initramfs-tools udev kmod iperf3 apparmor
  kver=$(ls /lib/modules | sort -V | tail -n 1)
  apt-get install -y -qq $o --no-install-recommends "linux-headers-$kver" dkms zfs-dkms zfsutils-linux
  # The postinst builds for the running (host) kernel; build for the image's.
  dkms autoinstall -k "$kver"
  modinfo -k "$kver" zfs >/dev/null
  modinfo -k "$kver" wireguard >/dev/null
  depmod "$kver"
  update-initramfs -u -k "$kver"
  # Units the container base masks because a container cannot run them; a
  # VM has its own kernel, so they run again.
  for u in systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
           systemd-remount-fs.service sys-kernel-config.mount sys-kernel-debug.mount \
           sys-kernel-tracing.mount; do
    rm -f "/etc/systemd/system/$u"
  done
  systemctl enable ployz-labvm-seed.service >/dev/null 2>&1
  # No login prompt on the serial console: it is a log file here.
  systemctl mask serial-getty@ttyS0.service >/dev/null 2>&1
  apt-get clean
  rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/*
  cp "/boot/vmlinuz-$kver" /boot/ployz-vmlinuz
  cp "/boot/initrd.img-$kver" /boot/ployz-initrd.img
CHROOT
rm -f "$root.log" "$root/usr/sbin/policy-rc.d"
: > "$root/etc/resolv.conf"
for m in dev/pts dev proc sys; do umount -l "$root/$m"; done

mkdir -p "$out.tmp"
mv "$root/boot/ployz-vmlinuz" "$out.tmp/vmlinuz"
mv "$root/boot/ployz-initrd.img" "$out.tmp/initrd.img"
echo "labvm: writing rootfs.ext4"
mkfs.ext4 -q -F -L ployzroot -d "$root" "$out.tmp/rootfs.ext4" 6G
rm -rf "$out"
mv "$out.tmp" "$out"
