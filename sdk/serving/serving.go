package serving

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/sdk/store"
)

// HoldFor bounds how long a moved Serving Pointer whose Containers are not
// yet seen ready (their rows replicate apart from the pointer's) keeps the
// previous set serving.
const HoldFor = 30 * time.Second

// ServiceKey is the "namespace/service" key of Services in Serving
// Pointers, routes and acks.
func ServiceKey(namespace, service string) string {
	return strings.ToLower(namespace) + "/" + strings.ToLower(service)
}

// Verdict is what one Container row is to its Service's traffic.
type Verdict int

// Verdicts.
const (
	NotReady Verdict = iota // not ready, no IPv4 address, or a stale session
	Waiting                 // ready, but the Service's Serving Pointer does not name it
	Serves                  // receives the Service's traffic
	// Refused: ready, but its address is not one its owner can vouch for
	// (the owner is no participating Machine, or the address lies outside
	// that Machine's subnet). A forged or stray row must not make every
	// Machine proxy to 169.254.169.254 or to its own loopback.
	Refused
	// OnDown: ready as far as its row says, but its Machine is Down in
	// this Machine's membership view: no lookup or request is sent into
	// a dead Machine. Its row is not waited for: a dead Machine writes
	// none. It serves again once the view holds its Machine up.
	OnDown
)

// ReadyAddr is the row's IPv4 address when the row says Ready in its
// Machine's current session (sessions maps Machine id to session; a
// Machine or row without one is not checked); otherwise invalid.
func ReadyAddr(r store.Row[store.ContainerBody], sessions map[string]string) netip.Addr {
	b := r.Body
	if !b.Ready {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(b.IP)
	if err != nil || !a.Unmap().Is4() {
		return netip.Addr{}
	}
	if s := sessions[r.Owner]; s != "" && b.Session != "" && b.Session != s {
		return netip.Addr{} // readiness from an earlier session of its Machine
	}
	return a.Unmap()
}

// Machines is what the machines table says of each Machine that a
// Container row's address is checked against.
type Machines struct {
	// Sessions maps a Machine id to its current session.
	Sessions map[string]string
	// Subnets maps each participating Machine's id to its subnet; a
	// Machine absent here vouches for no address.
	Subnets map[string]netip.Prefix
	// Down holds the (lowercase) ids of the Machines this Machine's
	// membership view holds Down; nil without a view.
	Down map[string]bool
	// Network is the Cluster network every Machine subnet is carved from,
	// as this Machine's own record (not the store) says; invalid when the
	// reader was not told it. A machines row is any store writer's to
	// forge, so its subnet alone bounds nothing: this does.
	Network netip.Prefix
	// Trusted maps each participating Machine whose machines row ployzd
	// accepted (its signature verified, TrustedMachines) to that row's
	// subnet; nil when the reader has no trust list (an older ployzd):
	// then the machines table alone is taken.
	Trusted map[string]netip.Prefix
}

// Vouched reports why ip is not an address the row's owner can vouch for,
// or nil when it lies in that participating Machine's subnet.
func (m Machines) Vouched(owner string, ip netip.Addr) error {
	if err := Routable(ip); err != nil {
		return err
	}
	if m.Network.IsValid() && !m.Network.Contains(ip) {
		return fmt.Errorf("address %s is outside the Cluster network %s", ip, m.Network)
	}
	subnet, ok := m.Subnets[strings.ToLower(owner)]
	if !ok {
		return fmt.Errorf("address %s: its owner %q is no participating Machine with a subnet", ip, owner)
	}
	if !subnet.Contains(ip) {
		return fmt.Errorf("address %s is outside its Machine's subnet %s", ip, subnet)
	}
	return m.trusts(owner, subnet)
}

// trusts reports why owner's subnet in the store is not the one ployzd
// accepted for it (a forged row: a new Machine id, or a changed subnet),
// or nil when it is, or when there is no trust list.
func (m Machines) trusts(owner string, subnet netip.Prefix) error {
	if m.Trusted == nil {
		return nil
	}
	accepted, ok := m.Trusted[strings.ToLower(owner)]
	if !ok {
		return fmt.Errorf("its owner %q has no participating machines row this Machine accepted (unsigned or forged)", owner)
	}
	if accepted != subnet {
		return fmt.Errorf("its owner's subnet %s in the store is not the one this Machine accepted (%s)", subnet, accepted)
	}
	return nil
}

// Routable reports why ip can never be a Container's address, whatever
// subnet a (possibly forged) machines row claims: link-local (cloud
// metadata, 169.254.169.254), unspecified, multicast and broadcast.
// Loopback is left to the Cluster network bound (Machines.Network, which
// ployzd always hands its plugins): test backends listen there.
func Routable(ip netip.Addr) error {
	switch {
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return fmt.Errorf("address %s is link-local", ip)
	case ip.IsUnspecified():
		return fmt.Errorf("address %s is unspecified", ip)
	case ip.IsMulticast(), ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("address %s is multicast or broadcast", ip)
	}
	return nil
}

// refusedRows is this process's last count of refused rows (SetRefused).
var refusedRows atomic.Int64

// SetRefused records how many ready rows the process's latest serving
// computation refused; a plugin calls it after each load.
func SetRefused(n int) { refusedRows.Store(int64(n)) }

// RefusedRows is the count SetRefused last recorded (sdk.Plugin's
// RefusedContainerRows).
func RefusedRows() int64 { return refusedRows.Load() }

// Judge classifies one row; pointers maps ServiceKey to the Service's
// Serving Pointer (absent: every ready Container serves).
func Judge(r store.Row[store.ContainerBody], pointers map[string]store.ServingBody, ms Machines) (netip.Addr, Verdict) {
	ip := ReadyAddr(r, ms.Sessions)
	if !ip.IsValid() {
		return ip, NotReady
	}
	if ms.Vouched(r.Owner, ip) != nil {
		return ip, Refused
	}
	if ms.Down[strings.ToLower(r.Owner)] {
		return ip, OnDown
	}
	if p, ok := pointers[ServiceKey(r.Body.Namespace, r.Body.Service)]; ok && !p.Has(r.Key, r.Owner, r.Body) {
		return ip, Waiting
	}
	return ip, Serves
}

// PointerMap indexes Serving Pointer rows by their lowercase key.
func PointerMap(rows []store.Row[store.ServingBody]) map[string]store.ServingBody {
	m := make(map[string]store.ServingBody, len(rows))
	for _, p := range rows {
		m[strings.ToLower(p.Key)] = p.Body
	}
	return m
}

// Member is one Container serving its Service.
type Member struct {
	Key   string // the Container's row key
	Owner string // the Machine it runs on (lowercase)
	IP    netip.Addr
	Body  store.ContainerBody
}

// Set is the serving Containers of one Service.
type Set struct {
	// Pointer is the id of the Serving Pointer the set follows ("" when the
	// Service has none).
	Pointer string
	// Members are sorted by address, one per address.
	Members []Member
	// Waiting counts ready Containers the pointer does not name.
	Waiting int
	// Refused counts ready rows whose address their owner cannot vouch
	// for (Machines.Vouched); they never serve.
	Refused int
	// Down lists the Machines (sorted, once each) whose ready Containers
	// were left out because this Machine holds them Down.
	Down []string
	// Held: the pointer is young and none of its Containers is seen ready
	// yet, so Members are the previous set's.
	Held bool
}

// Input is what Compute derives serving sets from.
type Input struct {
	Containers []store.Row[store.ContainerBody]
	Pointers   []store.Row[store.ServingBody]
	// Machines are the sessions and subnets of the machines table.
	Machines
	// Young are the Serving Pointer ids first seen less than HoldFor ago
	// (Ages tracks them).
	Young map[string]bool
	// Prev is the previous Compute's result, for held sets.
	Prev map[string]Set
}

// Compute returns every Service's serving set, keyed by ServiceKey. Rows
// without a namespace or service name are not part of any Service.
func Compute(in Input) map[string]Set {
	pointers := PointerMap(in.Pointers)
	out := map[string]Set{}
	for _, r := range in.Containers {
		b := r.Body
		if b.Namespace == "" || b.Service == "" {
			continue
		}
		k := ServiceKey(b.Namespace, b.Service)
		s := out[k]
		ip, v := Judge(r, pointers, in.Machines)
		switch v {
		case Refused:
			s.Refused++
		case Waiting:
			s.Waiting++
		case OnDown:
			if o := strings.ToLower(r.Owner); !slices.Contains(s.Down, o) {
				s.Down = append(s.Down, o)
			}
		case Serves:
			s.Members = append(s.Members, Member{Key: r.Key, Owner: strings.ToLower(r.Owner), IP: ip, Body: b})
		}
		out[k] = s
	}
	for k, s := range out {
		if p, ok := pointers[k]; ok {
			s.Pointer = p.ID
		}
		slices.Sort(s.Down)
		slices.SortFunc(s.Members, func(a, b Member) int { return a.IP.Compare(b.IP) })
		s.Members = slices.CompactFunc(s.Members, func(a, b Member) bool { return a.IP == b.IP })
		if prev := in.Prev[k]; len(s.Members) == 0 && s.Pointer != "" && in.Young[s.Pointer] && len(prev.Members) > 0 {
			// The pointer arrived before its Containers' ready rows: keep
			// the previous set until they do (or HoldFor passes).
			s.Members, s.Held = prev.Members, true
		}
		out[k] = s
	}
	return out
}

// Ages remembers when each Serving Pointer id was first seen, to tell a
// young pointer (HoldFor) from an old one. Not safe for concurrent use.
type Ages struct{ first map[string]time.Time }

// Young records the pointers' ids and returns those first seen less than
// HoldFor before now; ids no longer present are forgotten.
func (a *Ages) Young(pointers []store.Row[store.ServingBody], now time.Time) map[string]bool {
	if a.first == nil {
		a.first = map[string]time.Time{}
	}
	young := make(map[string]bool, len(pointers))
	for _, p := range pointers {
		t, ok := a.first[p.Body.ID]
		if !ok {
			t = now
			a.first[p.Body.ID] = t
		}
		young[p.Body.ID] = now.Sub(t) < HoldFor
	}
	for id := range a.first {
		if _, ok := young[id]; !ok {
			delete(a.first, id)
		}
	}
	return young
}

// HoldEnds is how long from now until the first pointer Young last found
// young stops being young (a held set is let go on time, not on a
// change); 0 when none is young.
func (a *Ages) HoldEnds(now time.Time) time.Duration {
	var next time.Duration
	for _, t := range a.first {
		if d := t.Add(HoldFor).Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next
}

// WatchQueries are the store subscriptions that follow what Read reads:
// exactly the columns Compute uses, so a Machine's other fields (its
// heartbeat, labels) wake nothing.
var WatchQueries = []string{
	`SELECT id, owner, body FROM containers`,
	`SELECT id, body FROM serving`,
	`SELECT id, json_extract(body, '$.session'), json_extract(body, '$.subnet'), json_extract(body, '$.phase') FROM machines`,
}

// MembershipPoll is how often Watch reads the membership view of a store
// that does not hold reads until it changes (an older one): a Machine
// going Down changes no row, so this bounds how long after the verdict
// its Containers are still served.
const MembershipPoll = time.Second

// Watch follows what Read reads until ctx ends: the WatchQueries by
// subscription, the membership view by reads the store holds until it
// changes (every MembershipPoll from an older store; a change of the
// Machines it holds Down wakes the watch), and the trust list at
// trustedFile (ployzd accepting a row changes it, not the table; ""
// follows none). do runs f with a client
// (store.TokenFileClient.Do).
func Watch(ctx context.Context, do func(f func(*store.Client) error) error, trustedFile string, log hclog.Logger) *store.Watch {
	w := store.NewWatch(ctx, do, WatchQueries, log)
	w.FollowMembership(ctx, do, MembershipPoll, log)
	go followTrusted(trustedFile).run(ctx, w.Wake)
	return w
}

// Bounds are what a reader's spec bounds Container addresses with,
// beyond what the machines table says.
type Bounds struct {
	// Network is the Cluster network (invalid: not bounded by one).
	Network netip.Prefix
	// TrustedFile is ployzd's trust list (TrustedMachines; "": none).
	TrustedFile string
}

// Participating is the phase of a Machine row whose Containers may serve.
const Participating = "participating"

// Read reads what Compute takes from the store: the containers, serving
// and machines tables (Containers, Pointers, Machines), and the store's
// membership view (Machines.Down; none when the store has no view or
// does not answer it: a view that cannot be read leaves nothing out).
// b are the bounds from the reader's spec: the Cluster network
// (Machines.Network) and ployzd's trust list (Machines.Trusted).
func Read(ctx context.Context, r store.Reader, b Bounds) (Input, error) {
	var in Input
	trusted, err := ReadTrusted(b.TrustedFile)
	if err != nil {
		return in, err
	}
	if in.Containers, err = r.Containers(ctx); err != nil {
		return in, err
	}
	if in.Pointers, err = r.ServingPointers(ctx); err != nil {
		return in, err
	}
	ms, err := r.Machines(ctx)
	if err != nil {
		return in, err
	}
	in.Machines = MachinesOf(ms)
	in.Machines.Network = b.Network
	if trusted != nil {
		in.Machines.Trusted = trusted.Subnets()
	}
	if view, err := r.Membership(ctx); err == nil {
		in.Machines.Down = DownOf(ms, view)
	}
	return in, nil
}

// DownOf maps the store sites the view holds down to the ids of the
// Machines whose records name them.
func DownOf(rows []store.Row[store.MachineBody], view store.Membership) map[string]bool {
	sites := view.DownSites()
	out := map[string]bool{}
	for _, r := range rows {
		if r.Body.StoreSite != "" && sites[r.Body.StoreSite] {
			out[strings.ToLower(r.Key)] = true
		}
	}
	return out
}

// MachinesOf indexes machines rows: every Machine's session, and the
// subnet of each participating one whose subnet parses.
func MachinesOf(rows []store.Row[store.MachineBody]) Machines {
	m := Machines{Sessions: make(map[string]string, len(rows)), Subnets: make(map[string]netip.Prefix, len(rows))}
	for _, r := range rows {
		m.Sessions[r.Key] = r.Body.Session
		if r.Body.Phase != Participating {
			continue
		}
		if p, err := netip.ParsePrefix(r.Body.Subnet); err == nil && p.Addr().Is4() {
			m.Subnets[strings.ToLower(r.Key)] = p.Masked()
		}
	}
	return m
}
