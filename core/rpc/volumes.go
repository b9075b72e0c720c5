package rpc

// Volume commands are answered by this Machine's volume plugin (kind
// "volume", e.g. volume-zfs); ployzd serves each only while a healthy
// plugin advertises the capability of the same name (sdk/volume), else
// refuses it with details.capability. A Machine whose label
// ployz.zfs.pool is unset has no Provisioned Volumes and refuses all but
// list_volumes with failed_precondition, details.label naming the label.
const (
	CmdCreateVolume   = "create_volume"
	CmdRemoveVolume   = "remove_volume"
	CmdListVolumes    = "list_volumes"
	CmdInspectVolume  = "inspect_volume"
	CmdSnapshotVolume = "snapshot_volume"
	// CmdSendVolume streams a snapshot to the client: data frames, then
	// Done. CmdReceiveVolume reads data frames from the client until EOF
	// into a volume and answers one VolumeReceived event.
	CmdSendVolume    = "send_volume"
	CmdReceiveVolume = "receive_volume"
	// CmdSendVolumeTo runs on the source Machine: its ployzd sends the
	// snapshot stream straight to the target Machine's receive_volume
	// over the mesh (the volume transport, VolumePort) and streams
	// VolumeTransfer events to the client: progress at least every
	// second, then one with the target's answer.
	CmdSendVolumeTo = "send_volume_to"
	CapSendVolumeTo = "ployz.volume.send_to.v1"
	// CmdSetVolumeCopy is one step of a Volume Run: ployzd's own
	// transition table over its copy of a volume (core/volumecopy),
	// served while the volume plugin serves inspect.
	CmdSetVolumeCopy = "set_volume_copy"
	CapSetVolumeCopy = "ployz.volume.set_copy.v1"
)

// SetVolumeCopyRequest asks this Machine to move its copy of Volume from
// Expect (the copy the operator last saw here) to Want, for the Volume
// Run numbered Gen. A copy already at Want answers success; a copy at
// neither, or a Gen below the copy's floor, is refused naming the field.
type SetVolumeCopyRequest struct {
	Volume string `json:"volume"`
	Gen    uint64 `json:"gen"`
	Expect string `json:"expect"` // none, writer or mirror
	Want   string `json:"want"`
}

// VolumeCopy is a Machine's copy of a volume: its role (writer, mirror or
// none), a Writer's epoch and the floor, the newest run gen accepted.
type VolumeCopy struct {
	Role  string `json:"role"`
	Epoch int64  `json:"epoch,omitempty"`
	Floor uint64 `json:"floor,omitempty"`
}

// VolumeCopySet is set_volume_copy's answer: the copy as it is now.
type VolumeCopySet struct {
	MachineID string     `json:"machine_id"`
	Volume    string     `json:"volume"`
	Copy      VolumeCopy `json:"copy"`
	Changed   bool       `json:"changed"`
}

// CreateVolumeRequest asks for a Provisioned Volume on the target Machine.
type CreateVolumeRequest struct {
	Name      string `json:"name"`
	SizeBytes uint64 `json:"size_bytes"`
}

// VolumeRequest names one volume (remove_volume, inspect_volume).
type VolumeRequest struct {
	Name string `json:"name"`
}

// VolumeRemoved is remove_volume's answer.
type VolumeRemoved struct {
	MachineID string `json:"machine_id"` // first: the keys of the map it replaced, in order
	Removed   string `json:"removed"`
}

// SnapshotVolumeRequest names a volume and the snapshot to take.
type SnapshotVolumeRequest struct {
	Volume   string `json:"volume"`
	Snapshot string `json:"snapshot"`
}

// SendVolumeRequest picks a snapshot stream: full, incremental from
// FromSnapshot, or the rest of an interrupted one (ResumeToken alone).
type SendVolumeRequest struct {
	Volume       string `json:"volume,omitempty"`
	Snapshot     string `json:"snapshot,omitempty"`
	FromSnapshot string `json:"from_snapshot,omitempty"`
	ResumeToken  string `json:"resume_token,omitempty"`
	// RawData asks for the data in each Frame's raw field rather than
	// base64 in its JSON (a client that sets it reads both); a Machine
	// from before it sends JSON, which such a client reads as well.
	RawData bool `json:"raw_data,omitempty"`
}

// SendVolumeToRequest is send_volume_to's request: the stream as
// SendVolumeRequest picks it, and the Machine it lands on (ID, unique ID
// prefix or name), in the volume of the same name; Resumable as in
// ReceiveVolumeRequest.
type SendVolumeToRequest struct {
	Volume       string `json:"volume,omitempty"`
	Snapshot     string `json:"snapshot,omitempty"`
	FromSnapshot string `json:"from_snapshot,omitempty"`
	ResumeToken  string `json:"resume_token,omitempty"`
	Target       string `json:"target"`
	Resumable    bool   `json:"resumable,omitempty"`
}

// Send is the stream part of r, as send_volume takes it.
func (r SendVolumeToRequest) Send() SendVolumeRequest {
	return SendVolumeRequest{Volume: r.Volume, Snapshot: r.Snapshot, FromSnapshot: r.FromSnapshot, ResumeToken: r.ResumeToken}
}

// VolumeTransfer is one send_volume_to event: Bytes sent to the target
// so far, the stream's EstimatedBytes when the source's plugin gave one
// (0: unknown), and, on the last event only, Received: the target's
// answer as receive_volume gives it.
type VolumeTransfer struct {
	TargetID       string          `json:"target_id,omitempty"`
	Bytes          uint64          `json:"bytes"`
	EstimatedBytes uint64          `json:"estimated_bytes,omitempty"`
	Received       *VolumeReceived `json:"received,omitempty"`
}

// ReceiveVolumeRequest names the volume a stream lands in.
type ReceiveVolumeRequest struct {
	Volume    string `json:"volume"`
	Resumable bool   `json:"resumable,omitempty"`
}

// VolumeSnapshot is one snapshot of a volume.
type VolumeSnapshot struct {
	Name      string `json:"name"`
	Created   int64  `json:"created_unix_nano,omitempty"`
	UsedBytes uint64 `json:"used_bytes"`
	// GUID is equal on two Machines holding the same point in time.
	GUID string `json:"guid,omitempty"`
}

// VolumeBookmark is one bookmark of a volume: a snapshot's point in
// time, kept after the snapshot itself was destroyed.
type VolumeBookmark struct {
	Name    string `json:"name"`
	Created int64  `json:"created_unix_nano,omitempty"`
	// GUID is the snapshot's it was made from.
	GUID string `json:"guid,omitempty"`
}

// Volume is one Provisioned Volume on one Machine.
type Volume struct {
	MachineID  string `json:"machine_id"`
	Name       string `json:"name"`
	Pool       string `json:"pool,omitempty"`
	Dataset    string `json:"dataset,omitempty"`
	Mountpoint string `json:"mountpoint"`
	SizeBytes  uint64 `json:"size_bytes"` // the quota; 0: none
	UsedBytes  uint64 `json:"used_bytes"`
	Created    int64  `json:"created_unix_nano,omitempty"`
	// ResumeToken is set while an interrupted resumable receive can be
	// continued (send_volume's resume_token).
	ResumeToken string `json:"resume_token,omitempty"`
	// ReadOnly: the dataset refuses writes through its mountpoint (a
	// Mirror's; additive, absent when false).
	ReadOnly  bool             `json:"read_only,omitempty"`
	Snapshots []VolumeSnapshot `json:"snapshots"`
	// Bookmarks are what is left of run snapshots the copy pruned:
	// incremental bases for a send_volume's from_snapshot (additive:
	// absent from a Machine without them, or holding none).
	Bookmarks []VolumeBookmark `json:"bookmarks,omitempty"`
	// Copy is this Machine's copy of the volume (additive: absent from a
	// daemon without set_volume_copy).
	Copy *VolumeCopy `json:"copy,omitempty"`
}

// VolumeList is list_volumes' answer: Pool is empty on a Machine without
// Provisioned Volumes.
type VolumeList struct {
	MachineID string   `json:"machine_id"`
	Pool      string   `json:"pool,omitempty"`
	Health    string   `json:"health,omitempty"`
	FreeBytes uint64   `json:"free_bytes,omitempty"`
	Volumes   []Volume `json:"volumes"`
}

// VolumeReceived is receive_volume's final event.
type VolumeReceived struct {
	Bytes  uint64 `json:"bytes"`
	Volume Volume `json:"volume"`
}
