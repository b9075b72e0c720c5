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
