package sdk

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/hashicorp/go-plugin"
)

// HandshakeVersion is the go-plugin protocol version of the handshake. It
// changes only if the transport itself changes; plugin behaviour is
// versioned by plugin-API versions and capability names instead.
const HandshakeVersion = 1

// MagicCookieKey and MagicCookieValue are the environment variable a host
// sets when it starts a managed plugin. They guard against running a plugin
// by hand by mistake; they are not a security measure.
const (
	MagicCookieKey   = "PLOYZ_PLUGIN_MAGIC_COOKIE"
	MagicCookieValue = "6f3b1c2e-ployz-plugin-9d4a"
)

// Handshake is the one go-plugin handshake every Ployz plugin and host use.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  HandshakeVersion,
	MagicCookieKey:   MagicCookieKey,
	MagicCookieValue: MagicCookieValue,
}

// DispenseName is the go-plugin plugin-set key under which a Ployz plugin
// serves all its gRPC services.
const DispenseName = "ployz"

// APIVersion1 is the first plugin-API version: Info, Configure, and the
// per-kind services as defined in sdk/proto/ployz/plugin/*/v1.
const APIVersion1 uint32 = 1

// SupportedAPIVersions lists the plugin-API versions this SDK speaks. A
// plugin that leaves Plugin.APIVersions empty advertises these.
var SupportedAPIVersions = []uint32{APIVersion1}

// Kind names of the plugin kinds Ployz knows. Third parties may use others.
const (
	KindDNS      = "dns"
	KindIngress  = "ingress"
	KindVolume   = "volume"
	KindLogStore = "logstore"
	KindMetrics  = "metrics"
)

// Negotiate returns the highest plugin-API version present in both lists,
// and false when they share none.
func Negotiate(host, plugin []uint32) (uint32, bool) {
	var best uint32
	found := false
	for _, v := range plugin {
		if slices.Contains(host, v) && (!found || v > best) {
			best, found = v, true
		}
	}
	return best, found
}

var (
	capabilityRE = regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z0-9-]+)+\.v[1-9][0-9]*$`)
	nameRE       = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
)

// ValidCapability reports whether name is a well-formed capability name:
// lowercase dotted words ending in a major version, e.g. "ployz.dns.serve.v1".
func ValidCapability(name string) error {
	if !capabilityRE.MatchString(name) {
		return fmt.Errorf("capability name %q is not lowercase dotted words ending in .vN", name)
	}
	return nil
}

// ValidName reports whether name is a well-formed plugin name ([a-z0-9-],
// starting with a letter, at most 63 characters).
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("plugin name %q must match %s", name, nameRE)
	}
	return nil
}
