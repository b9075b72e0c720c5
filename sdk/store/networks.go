package store

import (
	"slices"
	"strings"
)

// Isolation networks (docs/security.md, "Namespace isolation"): a
// Container of namespace ns is on ns (its default network), on
// "<ns>/<name>" (a compose network of its own) or on "external:<name>"
// (shared by every namespace declaring it). ployzd's isolation rules and
// Internal DNS read a row's membership through the same helpers, so a row
// naming another namespace's network counts for neither.

// ExternalNetworkPrefix starts the isolation network of a compose
// network declared external: true, shared by every namespace declaring it.
const ExternalNetworkPrefix = "external:"

// NetworkAllowed reports whether a Container of namespace ns may be on
// isolation network n: its own namespace's networks and external ones.
func NetworkAllowed(ns, n string) bool {
	switch {
	case n == ns:
		return ns != ""
	case strings.HasPrefix(n, ns+"/"):
		return ns != "" && len(n) > len(ns)+1
	case strings.HasPrefix(n, ExternalNetworkPrefix):
		return len(n) > len(ExternalNetworkPrefix)
	}
	return false
}

// IsolationNetworks are the networks the row's Container is on: those of
// Networks its namespace may be on, or its namespace's alone when none is.
func (b ContainerBody) IsolationNetworks() []string {
	var out []string
	for _, n := range b.Networks {
		if NetworkAllowed(b.Namespace, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return []string{b.Namespace}
	}
	return out
}

// NetworkAliases are the row's aliases (compose networks.NAME.aliases)
// that count: on a network the Container is on, each a valid alias. A
// reader ignores the rest, so a row cannot name itself on a network it
// is not a member of.
func (b ContainerBody) NetworkAliases() map[string][]string {
	if len(b.Aliases) == 0 {
		return nil
	}
	on := b.IsolationNetworks()
	out := map[string][]string{}
	for n, as := range b.Aliases {
		if !slices.Contains(on, n) {
			continue
		}
		for _, a := range as {
			if ValidAlias(a) {
				out[n] = append(out[n], a)
			}
		}
	}
	return out
}

// ValidAlias reports whether a is a network alias Internal DNS can
// answer: one lowercase DNS label (letters, digits and -, at most 63,
// not starting or ending with -). It is looked up as <alias>.internal and
// through the search domain as <alias>.<namespace>.internal, so a dot
// would make it another name form.
func ValidAlias(a string) bool {
	if len(a) == 0 || len(a) > 63 || a[0] == '-' || a[len(a)-1] == '-' {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
