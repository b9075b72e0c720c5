package rpc

// CmdPullImage pulls one image from its registry into this Machine's
// Docker: a Deploy sends it before creating a Container whose image the
// Machine lacks. The credentials ride in the request only; the daemon uses
// them for this one pull and neither stores nor logs them.
const (
	CmdPullImage = "pull_image"
	CapPullImage = "ployz.image.pull.v1"
)

// PullImageRequest is pull_image's payload.
type PullImageRequest struct {
	Image string `json:"image"`
	// RegistryAuth is Docker's encoded registry credential (the
	// X-Registry-Auth header value: base64url JSON); empty pulls
	// anonymously.
	RegistryAuth string `json:"registry_auth,omitempty"`
}

// PullImageResult is pull_image's answer.
type PullImageResult struct {
	Image string `json:"image"`
	// ID is the pulled image's id on this Machine.
	ID string `json:"id"`
	// Status is Docker's last status line, e.g. "Downloaded newer image".
	Status string `json:"status,omitempty"`
}

// CmdImageRelay is a streaming command served by the Entry Machine: the
// client sends one image archive (`docker save` format) as data frames,
// and the Machine streams it on, over the mesh, into the Docker of every
// target (itself included when named), so the operator's link carries
// each byte once. Each target's copy leaves out the archive entries it
// names in Skip (the layers it already holds).
//
// The Machine answers, in order: one ImageRelayEvent with Ready set once
// it has reached every target it can (the client waits for it before
// sending data; a Machine without this command answers an unsupported
// error instead), ImageRelayEvents with Progress while data flows, and
// one with Results when every target has finished. One target failing
// never stops the others.
const (
	CmdImageRelay = "image_relay"
	CapImageRelay = "ployz.image.relay.v1"
)

// ImageRelayRequest is image_relay's payload.
type ImageRelayRequest struct {
	Targets []ImageRelayTarget `json:"targets"`
}

// ImageRelayTarget is one Machine an image_relay delivers to.
type ImageRelayTarget struct {
	MachineID string `json:"machine_id"`
	// Skip lists archive entry names this Machine goes without.
	Skip []string `json:"skip,omitempty"`
}

// ImageRelayEvent is every event of an image_relay stream; one field is
// set per event.
type ImageRelayEvent struct {
	Ready bool `json:"ready,omitempty"`
	// Progress is the bytes written towards each target so far, by
	// Machine ID.
	Progress map[string]int64 `json:"progress,omitempty"`
	// Results is each target's outcome, once all have finished.
	Results []ImageRelayResult `json:"results,omitempty"`
}

// ImageRelayResult is one target's outcome.
type ImageRelayResult struct {
	MachineID   string   `json:"machine_id"`
	MachineName string   `json:"machine_name,omitempty"`
	Bytes       int64    `json:"bytes"`
	Loaded      []string `json:"loaded,omitempty"`
	// Error is why this target has not got the image; nil on success.
	Error *Error `json:"error,omitempty"`
}

// CmdPullImageProgress is pull_image as a streaming command: the same
// request, answered with PullImageEvents carrying Progress while the pull
// runs (at most a few a second) and one carrying Result at the end. A
// deploy uses it to show a pull's bytes; a Machine without it is asked
// pull_image.
const (
	CmdPullImageProgress = "pull_image_progress"
	CapPullImageProgress = "ployz.image.pull.progress.v1"
)

// PullImageEvent is one event of pull_image_progress; one field is set.
type PullImageEvent struct {
	Progress *PullProgress    `json:"progress,omitempty"`
	Result   *PullImageResult `json:"result,omitempty"`
}

// PullProgress is how far a pull is, over the layers Docker has named
// so far (a layer's size is known once its download starts).
type PullProgress struct {
	Layers     int   `json:"layers"`
	LayersDone int   `json:"layers_done"`
	Bytes      int64 `json:"bytes"`
	Total      int64 `json:"total"`
}
