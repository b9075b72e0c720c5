package meshaddr

import (
	"fmt"
	"net/netip"
	"slices"
)

// DefaultNetwork is the Cluster network that Machine subnets are carved from.
var DefaultNetwork = netip.MustParsePrefix("10.210.0.0/16")

// SubnetBits is the prefix length of one Machine subnet.
const SubnetBits = 24

// managementPrefix is fdcc::/16; the management address appends key bytes to it.
var managementPrefix = [2]byte{0xfd, 0xcc}

// Gateway returns the .1 address of a Machine subnet: the Docker bridge's
// gateway (and container DNS) and the source of mesh traffic from this Machine.
func Gateway(subnet netip.Prefix) (netip.Addr, error) {
	subnet = subnet.Masked()
	if !subnet.Addr().Is4() || subnet.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("subnet %s: want an IPv4 prefix of /30 or wider", subnet)
	}
	return subnet.Addr().Next(), nil
}

// ManagementIP derives a Machine's management IPv6 address from its WireGuard
// public key: the fdcc::/16 prefix followed by the first 14 bytes of the key,
// used as a /128. It is a pure function of the key, so any Machine can compute
// a peer's address from the peer's row without asking it.
func ManagementIP(publicKey [32]byte) netip.Addr {
	var a [16]byte
	copy(a[:2], managementPrefix[:])
	copy(a[2:], publicKey[:14])
	return netip.AddrFrom16(a)
}

// SubnetAt returns the i-th /24 of network (index 0 is network's first /24).
func SubnetAt(network netip.Prefix, i int) (netip.Prefix, error) {
	network = network.Masked()
	if !network.Addr().Is4() || network.Bits() > SubnetBits {
		return netip.Prefix{}, fmt.Errorf("network %s: want an IPv4 prefix of /%d or wider", network, SubnetBits)
	}
	n := 1 << (SubnetBits - network.Bits())
	if i < 0 || i >= n {
		return netip.Prefix{}, fmt.Errorf("subnet index %d: network %s holds %d subnets", i, network, n)
	}
	b := network.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(i) << (32 - SubnetBits)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), SubnetBits), nil
}

// NextFreeSubnet returns the lowest /24 of DefaultNetwork that overlaps none
// of used. It is the operator's allocator helper: the caller passes its
// allocation history plus whatever it observed, and records the answer before
// using it (docs/architecture.md bet 6: allocation is optimistic).
func NextFreeSubnet(used []netip.Prefix) (netip.Prefix, error) {
	return NextFreeSubnetIn(DefaultNetwork, used)
}

// NextFreeSubnetIn is NextFreeSubnet for a Cluster network other than the default.
func NextFreeSubnetIn(network netip.Prefix, used []netip.Prefix) (netip.Prefix, error) {
	network = network.Masked()
	if !network.Addr().Is4() || network.Bits() > SubnetBits {
		return netip.Prefix{}, fmt.Errorf("network %s: want an IPv4 prefix of /%d or wider", network, SubnetBits)
	}
	n := 1 << (SubnetBits - network.Bits())
	for i := range n {
		s, _ := SubnetAt(network, i)
		if !slices.ContainsFunc(used, func(u netip.Prefix) bool { return u.IsValid() && u.Overlaps(s) }) {
			return s, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("network %s: all %d subnets are used", network, n)
}
