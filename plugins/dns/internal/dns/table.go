package dns

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
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
	// hosts maps every Container address to its Service, for PTR
	// answers and for the caller's namespace of <service>.internal.
	hosts map[netip.Addr]host
	sets  map[string]serving.Set
	// aliases are the serving Containers by compose network alias:
	// "<network>\x00<alias>" (aliasKey), answered only to a caller on
	// that network.
	aliases map[string][]Target
	// refused are the ready rows whose address their owner cannot vouch
	// for (serving.Refused): never answered, reported by the loader.
	refused []Refusal
}

// Refusal is one ready Container row Internal DNS does not answer, and why.
type Refusal struct {
	Key, Owner string
	IP         netip.Addr
	Reason     string
}

// host is the Container holding an address.
type host struct {
	ptr       string // "<service>.<namespace>.internal."
	namespace string
	networks  []string // its isolation networks: whose aliases it resolves
	rank      int      // which row wins an address several rows claim
}

// NewTable indexes Containers with no Serving Pointers (tests, --probe);
// ms are the Machines that vouch for their addresses.
func NewTable(ms serving.Machines, rows []store.Row[store.ContainerBody]) *Table {
	return Build(serving.Input{Machines: ms, Containers: rows})
}

// Build indexes the serving sets the sdk's Serving Pointer computation
// gives for in (the same one every ingress follows): a Service answers
// only its ready Containers the pointer names, local ones first for
// nearest names.
func Build(in serving.Input) *Table {
	sets := serving.Compute(in)
	t := &Table{services: map[string][]Target{}, ids: map[string][]Target{}, hosts: map[netip.Addr]host{}, sets: sets,
		aliases: map[string][]Target{}}
	for _, s := range sets {
		for _, m := range s.Members {
			tg := Target{IP: m.IP, Machine: m.Owner}
			for n, as := range m.Body.NetworkAliases() {
				for _, a := range as {
					t.aliases[aliasKey(n, a)] = append(t.aliases[aliasKey(n, a)], tg)
				}
			}
			k := strings.ToLower(m.Body.Service) + "." + strings.ToLower(m.Body.Namespace)
			t.services[k] = append(t.services[k], tg)
			if m.Body.ServiceID != "" {
				id := strings.ToLower(m.Body.ServiceID)
				t.ids[id] = append(t.ids[id], tg)
			}
		}
	}
	for _, r := range in.Containers {
		b := r.Body
		ip, err := netip.ParseAddr(b.IP)
		if err != nil || !ip.Unmap().Is4() || b.Service == "" || b.Namespace == "" {
			continue
		}
		if err := in.Vouched(r.Owner, ip.Unmap()); err != nil {
			// No PTR and no caller namespace from an address its owner
			// cannot vouch for either.
			if serving.ReadyAddr(r, in.Sessions).IsValid() {
				t.refused = append(t.refused, Refusal{Key: r.Key, Owner: r.Owner, IP: ip.Unmap(), Reason: err.Error()})
			}
			continue
		}
		h := host{ptr: strings.ToLower(b.Service) + "." + strings.ToLower(b.Namespace) + "." + Zone,
			namespace: strings.ToLower(b.Namespace), networks: b.IsolationNetworks(), rank: hostRank(b)}
		if old, ok := t.hosts[ip.Unmap()]; !ok || h.rank > old.rank {
			t.hosts[ip.Unmap()] = h
		}
	}
	return t
}

// hostRank prefers, among rows claiming one address, a ready Container,
// then a running one, then the newest: an address Docker handed on from
// a stopped Container names its new holder.
func hostRank(b store.ContainerBody) int {
	r := int(min(max(b.CreatedAt, 0), 1<<40))
	if b.State == "running" {
		r += 1 << 41
	}
	if b.Ready {
		r += 1 << 42
	}
	return r
}

// Sets is the serving computation the Table indexes: the Prev of the next
// Build.
func (t *Table) Sets() map[string]serving.Set { return t.sets }

// Refused lists the ready rows this Table does not answer because their
// owner cannot vouch for their address.
func (t *Table) Refused() []Refusal { return t.refused }

// Len is the number of indexed service names.
func (t *Table) Len() int { return len(t.services) }

// Host returns the PTR target of a Container address and the namespace of
// the Container holding it.
func (t *Table) Host(a netip.Addr) (ptr, namespace string, ok bool) {
	h, ok := t.hosts[a.Unmap()]
	return h.ptr, h.namespace, ok
}

// aliasKey indexes Table.aliases; a network name holds no NUL.
func aliasKey(network, alias string) string { return network + "\x00" + alias }

// AppendAlias appends to dst the addresses answering alias for the
// Container holding caller: the serving Containers carrying that alias
// on a network the caller is on, each address once, rotated by rot.
// found is false when the caller is no Container or no such Container
// serves (NXDOMAIN): a Container off the network never learns the name.
func (t *Table) AppendAlias(dst []netip.Addr, alias string, caller netip.Addr, rot uint64) (ips []netip.Addr, found bool) {
	h, ok := t.hosts[caller.Unmap()]
	if !ok || len(t.aliases) == 0 {
		return dst, false
	}
	start := len(dst)
	for _, n := range h.networks {
		set := t.aliases[aliasKey(n, alias)]
		for i := range uint64(len(set)) {
			if ip := set[(rot+i)%uint64(len(set))].IP; !slices.Contains(dst[start:], ip) {
				dst = append(dst, ip)
			}
		}
	}
	return dst, len(dst) > start
}

// Lookup appends to dst the addresses for n, local Machine's first for
// nearest names, rotated by rot. found is false when the name has no
// serving Container (NXDOMAIN). A NameShort must be resolved to a
// NameService by the caller (Handler does, by the query's source).
func (t *Table) Lookup(n Name, local string, subnet netip.Prefix, rot uint64) (ips []netip.Addr, found bool) {
	return t.AppendLookup(nil, n, local, subnet, rot)
}

// AppendLookup is Lookup appending to dst; it allocates nothing when dst
// has room.
func (t *Table) AppendLookup(dst []netip.Addr, n Name, local string, subnet netip.Prefix, rot uint64) (ips []netip.Addr, found bool) {
	var set []Target
	switch n.Kind {
	case NameService, NameNearest, NameMachine:
		set = t.services[n.Key]
	case NameID:
		set = t.ids[n.ServiceID]
	}
	if len(set) == 0 {
		return dst, false
	}
	switch n.Kind {
	case NameMachine:
		start := len(dst)
		for _, tg := range set {
			if tg.Machine == n.Machine {
				dst = append(dst, tg.IP)
			}
		}
		return dst, len(dst) > start
	case NameNearest:
		local = lower(local)
		near := func(tg Target) bool { return tg.Machine == local || (subnet.IsValid() && subnet.Contains(tg.IP)) }
		dst = rotate(dst, set, rot, near, true)
		return rotate(dst, set, rot, near, false), true
	}
	return rotate(dst, set, rot, nil, true), true
}

// rotate appends the Targets of set for which keep says want (all when
// keep is nil), starting at index rot mod len(set).
func rotate(dst []netip.Addr, set []Target, rot uint64, keep func(Target) bool, want bool) []netip.Addr {
	n := uint64(len(set))
	for i := range n {
		tg := set[(rot+i)%n]
		if keep == nil || keep(tg) == want {
			dst = append(dst, tg.IP)
		}
	}
	return dst
}
