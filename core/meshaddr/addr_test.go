package meshaddr

import (
	"net/netip"
	"testing"
)

func TestGateway(t *testing.T) {
	g, err := Gateway(netip.MustParsePrefix("10.210.7.0/24"))
	if err != nil || g != netip.MustParseAddr("10.210.7.1") {
		t.Fatalf("Gateway = %v, %v", g, err)
	}
	if g, _ := Gateway(netip.MustParsePrefix("10.210.7.99/24")); g != netip.MustParseAddr("10.210.7.1") {
		t.Fatalf("unmasked subnet: Gateway = %v", g)
	}
	for _, bad := range []string{"fd00::/64", "10.0.0.0/31"} {
		if _, err := Gateway(netip.MustParsePrefix(bad)); err == nil {
			t.Errorf("Gateway(%s): want error", bad)
		}
	}
	if _, err := Gateway(netip.Prefix{}); err == nil {
		t.Error("Gateway(zero): want error")
	}
}

func TestManagementIP(t *testing.T) {
	var k [32]byte
	for i := range k {
		k[i] = byte(i + 1)
	}
	got := ManagementIP(k)
	want := netip.MustParseAddr("fdcc:102:304:506:708:90a:b0c:d0e")
	if got != want {
		t.Fatalf("ManagementIP = %v, want %v", got, want)
	}
	if !netip.MustParsePrefix("fdcc::/16").Contains(got) {
		t.Fatalf("%v not in fdcc::/16", got)
	}
}

func TestSubnetAt(t *testing.T) {
	s, err := SubnetAt(DefaultNetwork, 255)
	if err != nil || s != netip.MustParsePrefix("10.210.255.0/24") {
		t.Fatalf("SubnetAt(255) = %v, %v", s, err)
	}
	if _, err := SubnetAt(DefaultNetwork, 256); err == nil {
		t.Fatal("SubnetAt(256): want error")
	}
	s, _ = SubnetAt(netip.MustParsePrefix("10.0.0.0/8"), 300)
	if s != netip.MustParsePrefix("10.1.44.0/24") {
		t.Fatalf("SubnetAt(/8, 300) = %v", s)
	}
}

func TestNextFreeSubnet(t *testing.T) {
	p := netip.MustParsePrefix
	cases := []struct {
		used []netip.Prefix
		want netip.Prefix
	}{
		{nil, p("10.210.0.0/24")},
		{[]netip.Prefix{p("10.210.0.0/24")}, p("10.210.1.0/24")},
		{[]netip.Prefix{p("10.210.0.0/24"), p("10.210.2.0/24")}, p("10.210.1.0/24")},
		// a wider used prefix blocks every /24 it covers
		{[]netip.Prefix{p("10.210.0.0/23")}, p("10.210.2.0/24")},
		// unrelated and zero prefixes are ignored
		{[]netip.Prefix{{}, p("192.168.0.0/24")}, p("10.210.0.0/24")},
	}
	for _, c := range cases {
		got, err := NextFreeSubnet(c.used)
		if err != nil || got != c.want {
			t.Errorf("NextFreeSubnet(%v) = %v, %v; want %v", c.used, got, err, c.want)
		}
	}
	if _, err := NextFreeSubnet([]netip.Prefix{DefaultNetwork}); err == nil {
		t.Error("full network: want error")
	}
	got, err := NextFreeSubnetIn(p("10.9.0.0/23"), []netip.Prefix{p("10.9.0.0/24")})
	if err != nil || got != p("10.9.1.0/24") {
		t.Errorf("NextFreeSubnetIn = %v, %v", got, err)
	}
}
