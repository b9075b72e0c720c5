package deploy

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/store"
)

// Compose networks become isolation networks (docs/compose.md): the
// `default` network is the namespace's own, a network of the file is the
// namespace's "<namespace>/<name>", and one declared `external: true` is
// shared with every namespace that declares it, by its name.

// externalNameRE is what an external network's name may be.
var externalNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// applyNetworks sets spec.Networks from the Service's networks (nil when
// it is on the default network only, so its spec hashes as before) and
// returns warnings for the keys that have no effect.
func applyNetworks(ns string, spec *rpc.ContainerSpec, s types.ServiceConfig, nets types.Networks) ([]string, error) {
	var out, warns []string
	for _, k := range slices.Sorted(maps.Keys(s.Networks)) {
		n, err := isolationNetwork(ns, k, nets)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
		c := s.Networks[k]
		if c == nil {
			continue
		}
		if err := applyAliases(spec, k, n, c.Aliases); err != nil {
			return nil, err
		}
		if c.Ipv4Address != "" || c.Ipv6Address != "" || c.MacAddress != "" || c.InterfaceName != "" || len(c.LinkLocalIPs) > 0 {
			warns = append(warns, fmt.Sprintf("networks.%s: addresses are ignored: Containers get theirs from their Machine's subnet and are reached by name", k))
		}
	}
	slices.Sort(out)
	if len(out) > 1 || len(out) == 1 && out[0] != ns {
		spec.Networks = slices.Compact(out)
	}
	return warns, nil
}

// applyAliases adds the aliases of compose network k (isolation network
// n) to spec.Aliases, lowercased (DNS names are case-insensitive),
// sorted and once each; one that is not a single DNS label is refused
// naming it.
func applyAliases(spec *rpc.ContainerSpec, k, n string, aliases []string) error {
	if len(aliases) == 0 {
		return nil
	}
	var as []string
	for i, a := range aliases {
		a = strings.ToLower(a)
		if !store.ValidAlias(a) {
			return fmt.Errorf("networks.%s.aliases[%d]: %q: want one DNS label (letters, digits and -, at most 63, no dot): it resolves as <alias> to the Services on %s", k, i, aliases[i], k)
		}
		as = append(as, a)
	}
	if spec.Aliases == nil {
		spec.Aliases = map[string][]string{}
	}
	as = append(spec.Aliases[n], as...)
	slices.Sort(as)
	spec.Aliases[n] = slices.Compact(as)
	return nil
}

// isolationNetwork is the isolation network of the compose network k.
func isolationNetwork(ns, k string, nets types.Networks) (string, error) {
	c, declared := nets[k]
	external := bool(c.External)
	switch {
	case k == "default" && !external:
		return ns, nil
	case !declared:
		return "", fmt.Errorf("networks.%s: not declared under the top-level networks", k)
	case !external:
		if !nameRE.MatchString(k) {
			return "", fmt.Errorf("networks.%s: want lowercase letters, digits, - and _", k)
		}
		return ns + "/" + k, nil
	}
	name := c.Name
	if name == "" {
		name = k
	}
	if !externalNameRE.MatchString(name) {
		return "", fmt.Errorf("networks.%s.name: %q: want letters, digits, _, . and -", k, name)
	}
	return rpc.ExternalNetworkPrefix + name, nil
}

// networkWarnings warns of the top-level network keys that have no
// effect: Ployz has one Docker network per Machine, isolation does the rest.
func networkWarnings(nets types.Networks) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(nets)) {
		c := nets[k]
		if c.Driver != "" || len(c.DriverOpts) > 0 || c.Internal || c.Attachable || len(c.Ipam.Config) > 0 || c.Ipam.Driver != "" || c.EnableIPv6 != nil || c.EnableIPv4 != nil {
			out = append(out, fmt.Sprintf("networks.%s: driver, ipam, internal, attachable and enable_ipv* are ignored: every network is an isolation network on the ployz bridge", k))
		}
	}
	return out
}
