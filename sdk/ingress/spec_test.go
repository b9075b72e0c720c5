package ingress

import (
	"testing"

	"github.com/ployz/ployz/sdk"
)

// TestCapabilitiesAreValidNames: whatever a spec turns on, every
// capability the ingress advertises is a name the plugin SDK and host
// accept (an invalid one made the plugin refuse to serve at all).
func TestCapabilitiesAreValidNames(t *testing.T) {
	secret := "/var/lib/ployz/store/cluster-secret"
	for _, s := range []*Spec{nil, {}, {ACME: &ACMESpec{}}, {ClusterSecretFile: secret}, {ACME: &ACMESpec{}, ClusterSecretFile: secret}} {
		for _, c := range Capabilities(s) {
			if err := sdk.ValidCapability(c); err != nil {
				t.Errorf("spec %+v: %v", s, err)
			}
		}
	}
}
