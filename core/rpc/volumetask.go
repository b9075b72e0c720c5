package rpc

// CmdVolumeTask is a Container step of a Volume Run that Docker decides
// the length of (docker stop at the cut, docker start of an undo or on
// the new Writer, an image pull on the target): ployzd admits it against
// its own copy of the volume, runs it in a task that outlives the
// request, and answers within a few seconds, busy while Docker works.
// The same request again joins that task or reads what Docker answered,
// so Docker runs once per transition. Served while Docker is.
const (
	CmdVolumeTask = "volume_task"
	CapVolumeTask = "ployz.volume.task.v1"
)

// Volume task kinds and states.
const (
	TaskStop  = "stop"
	TaskStart = "start"
	TaskPull  = "pull"

	TaskBusy   = "busy"
	TaskDone   = "done"
	TaskFailed = "failed"
)

// VolumeTaskRequest asks for one task on Volume for the Volume Run
// numbered Gen, admitted only while this Machine's copy has role Expect
// and Gen is not below the copy's floor (checked, not raised). Kind names
// which of Stop, Start or Pull it carries.
type VolumeTaskRequest struct {
	Volume string                `json:"volume"`
	Gen    uint64                `json:"gen"`
	Expect string                `json:"expect"` // none, writer or mirror
	Kind   string                `json:"kind"`   // stop, start or pull
	Stop   *StopContainerRequest `json:"stop,omitempty"`
	Start  *ContainerRef         `json:"start,omitempty"`
	Pull   *PullImageRequest     `json:"pull,omitempty"`
}

// VolumeTaskState is volume_task's answer. Readers treat a State they do
// not know as busy (ask again) and ignore fields they do not know.
type VolumeTaskState struct {
	MachineID string `json:"machine_id"`
	Volume    string `json:"volume"`
	Gen       uint64 `json:"gen"`
	Kind      string `json:"kind"`
	// Subject is the Container id (stop, start) or image (pull).
	Subject string `json:"subject"`
	State   string `json:"state"` // busy, done or failed
	// Error and Code are Docker's failure (failed only).
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	// ElapsedSeconds is how long the task ran, or has run so far.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Joined: an earlier request started the task this one answers.
	Joined bool `json:"joined,omitempty"`
}
