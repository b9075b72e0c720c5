package rpc

import (
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/sdk/volume"
)

// A volume's snapshots and the return to one (`ployz volume snapshot ls`
// and `restore`, docs/volumes.md "Snapshots: list and restore").
// list_volume_snapshots is ployzd's own over the plugin's inspect: each
// snapshot with whether the volume's stored x-volume retention keeps it.
// rollback_volume is the plugin's Rollback, admitted first against this
// Machine's copy: its Writer, a gen not below the copy's floor, no
// running Container mounting it, no Container task on it.
const (
	CmdListVolumeSnapshots = "list_volume_snapshots"
	CapListVolumeSnapshots = "ployz.volume.snapshots.v1"
	CmdRollbackVolume      = "rollback_volume"
)

// VolumeSnapshotInfo is one snapshot as list_volume_snapshots answers
// it: Auto for an automatic one (auto-YYYYMMDD-HHMM), and for those
// Kept with the rules that keep it (hourly, daily, weekly, newest, after
// now); an automatic one not kept is pruned at the next round. Other
// snapshots (an operator's, a run's) are never pruned by retention.
type VolumeSnapshotInfo struct {
	Name      string   `json:"name"`
	Created   int64    `json:"created_unix_nano,omitempty"`
	UsedBytes uint64   `json:"used_bytes"`
	GUID      string   `json:"guid,omitempty"`
	Auto      bool     `json:"auto,omitempty"`
	Kept      bool     `json:"kept,omitempty"`
	Rules     []string `json:"rules,omitempty"`
}

// VolumeSnapshots is list_volume_snapshots' answer: the volume's
// snapshots oldest first, its copy here, and the retention stored for
// it (nil: none declared, or the Cluster's store unreadable: Note says).
type VolumeSnapshots struct {
	MachineID string                `json:"machine_id"`
	Volume    string                `json:"volume"`
	Copy      *VolumeCopy           `json:"copy,omitempty"`
	Retention *volprotect.Retention `json:"retention,omitempty"`
	Note      string                `json:"note,omitempty"`
	Snapshots []VolumeSnapshotInfo  `json:"snapshots"`
}

// RollbackVolumeRequest returns Volume's copy here (the Writer) to
// Snapshot for the Volume Run numbered Gen; DestroyNewer allows
// destroying the snapshots and bookmarks newer than it, else a volume
// that has some is refused naming them.
type RollbackVolumeRequest struct {
	Volume       string `json:"volume"`
	Gen          uint64 `json:"gen"`
	Snapshot     string `json:"snapshot"`
	DestroyNewer bool   `json:"destroy_newer,omitempty"`
}

// Validate refuses a malformed request, naming the field.
func (r RollbackVolumeRequest) Validate() error {
	if err := volume.ValidName(r.Volume); err != nil {
		return InvalidField("volume", "%v", err)
	}
	if r.Gen == 0 {
		return InvalidField("gen", "required: the Volume Run's gen (1 or more)")
	}
	if err := volume.ValidSnapshot(r.Snapshot); err != nil {
		return InvalidField("snapshot", "%v", err)
	}
	return nil
}

// VolumeRolledBack is rollback_volume's answer: the volume after, and
// the newer snapshots ("name") and bookmarks ("#name") destroyed.
type VolumeRolledBack struct {
	MachineID string   `json:"machine_id"`
	Volume    Volume   `json:"volume"`
	Destroyed []string `json:"destroyed,omitempty"`
}
