package feature

import (
	"net/netip"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/meshaddr"
)

// The Machine's fixed names and ports (docs/architecture.md, "Network"),
// which core/daemon re-exports: the upgrade feature restarts and checks
// them too.
const (
	// WireGuardUnit is the userspace mesh device's systemd unit.
	WireGuardUnit = "ployz-wireguard.service"
	// StoreAPIPort stays reserved for the store's optional TCP API
	// (ployzd store --api-addr, outside Corrosion clients); nothing on a
	// Machine uses it: the store's unix socket carries its API.
	StoreAPIPort = 7571
)

// ErrSuffix is ": s", or nothing for an empty s: a status's error
// appended to its message.
func ErrSuffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// ClusterNetwork is the Cluster network of rec, or the default one for
// a record from before it was kept: what DNS, ingress and isolation
// bound Container addresses by.
func ClusterNetwork(rec machine.Record) netip.Prefix {
	if rec.Network.IsValid() {
		return rec.Network.Masked()
	}
	return meshaddr.DefaultNetwork
}
