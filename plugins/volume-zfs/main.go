// Command ployz-volume-zfs is Ployz's volume plugin for ZFS. ployzd
// installs it into the plugin store by digest and runs it long-lived under
// ployz-plugin@volume-zfs.service (`ployz-volume-zfs serve`). It holds the
// Machine's Provisioned Volumes as datasets <pool>/ployz/volumes/<name>
// with a quota, in the pool the Machine's ployz.zfs.pool label names
// (`ployz machine init|add|update --zfs-pool NAME`): create, remove, list,
// snapshots, and send/receive of snapshots (full, incremental, resumable).
// Contract: sdk/volume and sdk/proto/ployz/plugin/volume/v1.
package main

import (
	"os"

	"github.com/ployz/ployz/internal/version"
	"github.com/ployz/ployz/plugins/volume-zfs/internal/zfsvol"
)

func main() { os.Exit(zfsvol.Main(version.Version, os.Args[1:], os.Stderr)) }
