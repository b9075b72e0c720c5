package dockernet

import (
	"net/netip"
	"testing"

	"github.com/docker/docker/api/types/network"
)

func TestConfigDefaults(t *testing.T) {
	c, err := Config{Subnet: netip.MustParsePrefix("10.210.4.9/24")}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "ployz" || c.Bridge != "ployz-br" || c.MeshInterface != "ployz-wg" || c.MTU != 1420 ||
		c.ClusterNetwork != DefaultClusterNetwork || c.Subnet != netip.MustParsePrefix("10.210.4.0/24") ||
		c.gateway() != netip.MustParseAddr("10.210.4.1") {
		t.Fatalf("defaults = %+v", c)
	}
	for _, bad := range []Config{{}, {Subnet: netip.MustParsePrefix("fd00::/64")}, {Subnet: c.Subnet, Bridge: "a-name-too-long-x"}} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v: want error", bad)
		}
	}
}

func TestMismatch(t *testing.T) {
	cfg, _ := Config{Subnet: netip.MustParsePrefix("10.210.4.0/24")}.withDefaults()
	good := network.Inspect{Driver: "bridge",
		Options: map[string]string{optBridge: "ployz-br", optMTU: "1420"},
		IPAM:    network.IPAM{Config: []network.IPAMConfig{{Subnet: "10.210.4.0/24", Gateway: "10.210.4.1"}}}}
	if why := mismatch(good, cfg); why != "" {
		t.Fatalf("good network: %s", why)
	}
	bad := []func(*network.Inspect){
		func(n *network.Inspect) { n.Driver = "overlay" },
		func(n *network.Inspect) { n.Options = map[string]string{optMTU: "1420"} },
		func(n *network.Inspect) { n.Options = map[string]string{optBridge: "ployz-br"} },
		func(n *network.Inspect) { n.IPAM.Config = nil },
		func(n *network.Inspect) {
			n.IPAM.Config = []network.IPAMConfig{{Subnet: "10.210.5.0/24", Gateway: "10.210.5.1"}}
		},
		func(n *network.Inspect) {
			n.IPAM.Config = []network.IPAMConfig{{Subnet: "10.210.4.0/24", Gateway: "10.210.4.254"}}
		},
	}
	for i, f := range bad {
		n := good
		n.Options = map[string]string{optBridge: "ployz-br", optMTU: "1420"}
		f(&n)
		if mismatch(n, cfg) == "" {
			t.Errorf("case %d: mismatch not detected", i)
		}
	}
}
