package store

import (
	sdkstore "github.com/ployz/ployz/sdk/store"

	"github.com/ployz/ployz/core/volprotect"
)

// VolumePolicyBody is one Provisioned Volume's x-volume (table
// volume_policies, keyed by the volume's name): the namespace whose
// deploy declared it, and the Policy. Since (unix ms) is when it was
// first stored.
type VolumePolicyBody struct {
	Namespace  string            `json:"namespace"`
	Volume     string            `json:"volume"`
	Deployment string            `json:"deployment,omitempty"`
	Since      int64             `json:"since"`
	Policy     volprotect.Policy `json:"policy"`
}

// VolumePolicies is the volume_policies table.
func VolumePolicies(c *sdkstore.Client) sdkstore.Table[VolumePolicyBody] {
	return sdkstore.NewTable[VolumePolicyBody](c, "volume_policies", "id")
}
