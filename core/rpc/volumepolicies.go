package rpc

import (
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/sdk/volume"
)

// Volume protection (docs/volumes.md, "Protection on a schedule"): a
// deploy stores its namespace's x-volume policies through its entry
// (put_volume_policies); the Writer's Machine acts on them.
const (
	CmdPutVolumePolicies = "put_volume_policies"
	CapPutVolumePolicies = "ployz.volume.policies.put.v1"
)

// VolumePolicyDecl is one Provisioned Volume's declared Policy.
type VolumePolicyDecl struct {
	Volume string            `json:"volume"`
	Policy volprotect.Policy `json:"policy"`
}

// PutVolumePoliciesRequest stores Namespace's policies; with Prune the
// namespace's other policies are deleted (the deploy no longer declares
// them).
type PutVolumePoliciesRequest struct {
	Namespace  string             `json:"namespace"`
	Deployment string             `json:"deployment,omitempty"`
	Policies   []VolumePolicyDecl `json:"policies"`
	Prune      bool               `json:"prune,omitempty"`
}

// VolumePoliciesPut answers put_volume_policies: the volumes stored and
// those whose policy was removed.
type VolumePoliciesPut struct {
	Stored  []string `json:"stored"`
	Removed []string `json:"removed,omitempty"`
}

// Validate refuses a malformed request, naming the field.
func (r PutVolumePoliciesRequest) Validate() error {
	if r.Namespace == "" || len(r.Namespace) > 128 || !printable(r.Namespace) {
		return InvalidField("namespace", "%q: want 1 to 128 printable characters", clip(r.Namespace))
	}
	if len(r.Deployment) > 128 || !printable(r.Deployment) {
		return InvalidField("deployment", "%q: want at most 128 printable characters", clip(r.Deployment))
	}
	for i, p := range r.Policies {
		if err := volume.ValidName(p.Volume); err != nil {
			return InvalidField("policies[].volume", "policies[%d]: %v", i, err)
		}
		if err := p.Policy.Validate(); err != nil {
			return InvalidField("policies[].policy", "policies[%d]: %v", i, err)
		}
	}
	return nil
}
