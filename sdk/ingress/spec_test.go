package ingress

import (
	"net/netip"
	"strings"
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

// TestSpecNetwork: the Cluster network parses to the prefix serving bounds
// addresses by; one that is not an IPv4 prefix is refused naming the field.
func TestSpecNetwork(t *testing.T) {
	base := `{"machine":"m1","listen":":80","store_api":"/run/ployz/store/api.sock"`
	s, err := ParseSpec([]byte(base + `,"network":"10.210.7.0/16"}`))
	if err != nil || s.NetworkPrefix() != netip.MustParsePrefix("10.210.0.0/16") {
		t.Fatalf("%+v %v", s, err)
	}
	if s, err := ParseSpec([]byte(base + `}`)); err != nil || s.NetworkPrefix().IsValid() {
		t.Fatalf("no network: %+v %v", s, err)
	}
	for _, bad := range []string{"10.210.0.0", "fd00::/8", "x"} {
		if _, err := ParseSpec([]byte(base + `,"network":"` + bad + `"}`)); err == nil || !strings.Contains(err.Error(), `"network"`) {
			t.Errorf("network %q: %v, want a refusal naming the field", bad, err)
		}
	}
}

// TestSpecTrustedMachinesFile: ployzd's trust list is an absolute path;
// absent, the spec is one an older ployzd wrote.
func TestSpecTrustedMachinesFile(t *testing.T) {
	base := `{"machine":"m1","listen":":80","store_api":"/run/ployz/store/api.sock"`
	if s, err := ParseSpec([]byte(base + `,"trusted_machines_file":"/run/ployz/trusted-machines.json"}`)); err != nil || s.TrustedMachinesFile != "/run/ployz/trusted-machines.json" {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := ParseSpec([]byte(base + `,"trusted_machines_file":"trusted.json"}`)); err == nil || !strings.Contains(err.Error(), `"trusted_machines_file"`) {
		t.Fatalf("relative path: %v, want a refusal naming the field", err)
	}
}
