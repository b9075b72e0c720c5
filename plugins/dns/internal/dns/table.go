package dns

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/store"
)

// Target is one serving Container's address and the Machine it runs on.
type Target struct {
	IP      netip.Addr
	Machine string
}

// Table is an immutable snapshot of the serving Containers, indexed by the
// names Internal DNS answers. Build a new one for every load.
type Table struct {
	services map[string][]Target // "<service>.<namespace>"
	ids      map[string][]Target // service id
}

// NewTable indexes the Containers whose row says Ready and that have an
// IPv4 address. The row's owner is the Machine the Container runs on.
func NewTable(rows []store.Row[store.ContainerBody]) *Table {
	t := &Table{services: map[string][]Target{}, ids: map[string][]Target{}}
	for _, r := range rows {
		b := r.Body
		if !b.Ready {
			continue
		}
		ip, err := netip.ParseAddr(b.IP)
		if err != nil || !ip.Unmap().Is4() {
			continue
		}
		tg := Target{IP: ip.Unmap(), Machine: strings.ToLower(r.Owner)}
		if b.Service != "" && b.Namespace != "" {
			k := strings.ToLower(b.Service) + "." + strings.ToLower(b.Namespace)
			t.services[k] = append(t.services[k], tg)
		}
		if b.ServiceID != "" {
			k := strings.ToLower(b.ServiceID)
			t.ids[k] = append(t.ids[k], tg)
		}
	}
	for _, m := range []map[string][]Target{t.services, t.ids} {
		for k, v := range m {
			slices.SortFunc(v, func(a, b Target) int { return a.IP.Compare(b.IP) })
			m[k] = slices.CompactFunc(v, func(a, b Target) bool { return a.IP == b.IP })
		}
	}
	return t
}

// Len is the number of indexed service names.
func (t *Table) Len() int { return len(t.services) }

// Lookup returns the addresses for n, local Machine's first for nearest
// names, rotated by rot. found is false when the name has no serving
// Container (NXDOMAIN).
func (t *Table) Lookup(n Name, local string, subnet netip.Prefix, rot uint64) (ips []netip.Addr, found bool) {
	var set []Target
	switch n.Kind {
	case NameService, NameNearest:
		set = t.services[n.Service+"."+n.Namespace]
	case NameMachine:
		for _, tg := range t.services[n.Service+"."+n.Namespace] {
			if tg.Machine == n.Machine {
				set = append(set, tg)
			}
		}
	case NameID:
		set = t.ids[n.ServiceID]
	}
	if len(set) == 0 {
		return nil, false
	}
	if n.Kind != NameNearest {
		return rotate(set, rot, nil), true
	}
	local = strings.ToLower(local)
	var near, far []Target
	for _, tg := range set {
		if tg.Machine == local || (subnet.IsValid() && subnet.Contains(tg.IP)) {
			near = append(near, tg)
		} else {
			far = append(far, tg)
		}
	}
	return rotate(far, rot, rotate(near, rot, nil)), true
}

// rotate appends set to out starting at index rot mod len(set).
func rotate(set []Target, rot uint64, out []netip.Addr) []netip.Addr {
	n := uint64(len(set))
	for i := range n {
		out = append(out, set[(rot+i)%n].IP)
	}
	return out
}
