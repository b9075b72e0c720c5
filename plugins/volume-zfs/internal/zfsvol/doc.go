// Package zfsvol is the whole of the volume-zfs plugin: the ZFS side
// (datasets under <pool>/ployz/volumes, quotas, snapshots, zfs send and
// receive) and the Volume gRPC service answering from it. It drives the
// zfs(8) and zpool(8) commands through github.com/mistifyio/go-zfs/v3, and
// runs `zfs send`/`zfs receive` itself where that library has no flag
// for what a transfer needs (-p, -t, -s, -o, a context to cut it).
package zfsvol
