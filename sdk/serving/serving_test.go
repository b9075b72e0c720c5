package serving

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/store"
)

func crow(key, owner, ns, svc, ip, dep string, ready bool) store.Row[store.ContainerBody] {
	return store.Row[store.ContainerBody]{Key: key, Owner: owner, Body: store.ContainerBody{
		Namespace: ns, Service: svc, IP: ip, Ready: ready, Deployment: dep, Session: "s1"}}
}

// testMachines are m1..m3 participating with the subnets the tests' rows
// use: Machine mN holds 10.210.N.0/24.
var testMachines = Machines{Subnets: map[string]netip.Prefix{
	"m1": netip.MustParsePrefix("10.210.1.0/24"), "m2": netip.MustParsePrefix("10.210.2.0/24"), "m3": netip.MustParsePrefix("10.210.3.0/24")}}

// participatingTable is MachinesOf a machines table of participating
// Machines (id, subnet pairs) in the Cluster network 10.210.0.0/16.
func participatingTable(idSubnets ...string) Machines {
	var rows []store.Row[store.MachineBody]
	for i := 0; i+1 < len(idSubnets); i += 2 {
		rows = append(rows, store.Row[store.MachineBody]{Key: idSubnets[i],
			Body: store.MachineBody{Phase: Participating, Subnet: idSubnets[i+1]}})
	}
	ms := MachinesOf(rows)
	ms.Network = netip.MustParsePrefix("10.210.0.0/16")
	return ms
}

func pointer(svc, id string, cs ...store.ServingContainer) store.Row[store.ServingBody] {
	return store.Row[store.ServingBody]{Key: svc, Body: store.ServingBody{ID: id, Containers: cs}}
}

func keys(s Set) []string {
	var out []string
	for _, m := range s.Members {
		out = append(out, m.Key)
	}
	return out
}

func TestComputeFollowsThePointer(t *testing.T) {
	rows := []store.Row[store.ContainerBody]{
		crow("old1", "m1", "demo", "web", "10.210.1.2", "d1", true),
		crow("old2", "m2", "demo", "web", "10.210.2.2", "d1", true),
		crow("new1", "m1", "demo", "web", "10.210.1.3", "d2", true),
		crow("new2", "m2", "demo", "web", "10.210.2.3", "d2", false),
		crow("api", "m2", "demo", "api", "10.210.2.9", "d1", true),
	}
	// No pointer: every ready Container serves.
	got := Compute(Input{Machines: testMachines, Containers: rows})
	if k := keys(got["demo/web"]); len(k) != 3 || got["demo/web"].Pointer != "" {
		t.Fatalf("no pointer: %v", got["demo/web"])
	}
	// The pointer names the old deployment: the new ready one waits.
	p1 := pointer("Demo/Web", "p1", store.ServingContainer{ID: "old1", Machine: "m1", Deployment: "d1"},
		store.ServingContainer{ID: "old2", Machine: "m2", Deployment: "d1"})
	got = Compute(Input{Machines: testMachines, Containers: rows, Pointers: []store.Row[store.ServingBody]{p1}})
	w := got["demo/web"]
	if k := keys(w); len(k) != 2 || k[0] != "old1" || k[1] != "old2" || w.Waiting != 1 || w.Pointer != "p1" {
		t.Fatalf("pointer p1: %+v", w)
	}
	if k := keys(got["demo/api"]); len(k) != 1 {
		t.Fatalf("api has no pointer and serves: %+v", got["demo/api"])
	}
	// The pointer moves: only new1 (ready) serves; old ones drop out.
	p2 := pointer("demo/web", "p2", store.ServingContainer{ID: "new1", Machine: "m1", Deployment: "d2"},
		store.ServingContainer{ID: "new2", Machine: "m2", Deployment: "d2"})
	got = Compute(Input{Machines: testMachines, Containers: rows, Pointers: []store.Row[store.ServingBody]{p2}, Prev: got, Young: map[string]bool{"p2": true}})
	if k := keys(got["demo/web"]); len(k) != 1 || k[0] != "new1" || got["demo/web"].Held {
		t.Fatalf("pointer p2: %+v", got["demo/web"])
	}
	// A pointer naming another deployment than the row's: not named.
	bad := pointer("demo/web", "p3", store.ServingContainer{ID: "new1", Machine: "m1", Deployment: "d9"})
	if k := keys(Compute(Input{Machines: testMachines, Containers: rows, Pointers: []store.Row[store.ServingBody]{bad}})["demo/web"]); len(k) != 0 {
		t.Fatalf("deployment mismatch served: %v", k)
	}
}

func TestComputeHoldsForAYoungPointer(t *testing.T) {
	rows := []store.Row[store.ContainerBody]{
		crow("old1", "m1", "demo", "web", "10.210.1.2", "d1", true),
		crow("new1", "m1", "demo", "web", "10.210.1.3", "d2", false),
	}
	prev := Compute(Input{Machines: testMachines, Containers: rows})
	p := pointer("demo/web", "p2", store.ServingContainer{ID: "new1"})
	ps := []store.Row[store.ServingBody]{p}
	held := Compute(Input{Machines: testMachines, Containers: rows, Pointers: ps, Prev: prev, Young: map[string]bool{"p2": true}})
	if k := keys(held["demo/web"]); len(k) != 1 || k[0] != "old1" || !held["demo/web"].Held {
		t.Fatalf("young pointer without ready Containers: %+v", held["demo/web"])
	}
	// Past HoldFor: nothing serves rather than the superseded Container.
	if s := Compute(Input{Machines: testMachines, Containers: rows, Pointers: ps, Prev: held, Young: map[string]bool{"p2": false}})["demo/web"]; len(s.Members) != 0 || s.Held {
		t.Fatalf("old pointer: %+v", s)
	}
}

func TestComputeIgnoresStaleSessions(t *testing.T) {
	rows := []store.Row[store.ContainerBody]{crow("a", "m1", "demo", "web", "10.210.1.2", "d1", true)}
	if s := Compute(Input{Containers: rows, Machines: Machines{Sessions: map[string]string{"m1": "s2"}, Subnets: testMachines.Subnets}})["demo/web"]; len(s.Members) != 0 {
		t.Fatalf("a verdict from an earlier session served: %+v", s)
	}
	if s := Compute(Input{Containers: rows, Machines: Machines{Sessions: map[string]string{"m1": "s1"}, Subnets: testMachines.Subnets}})["demo/web"]; len(s.Members) != 1 {
		t.Fatalf("current session: %+v", s)
	}
}

func TestAges(t *testing.T) {
	var a Ages
	t0 := time.Unix(1000, 0)
	ps := []store.Row[store.ServingBody]{pointer("demo/web", "p1")}
	if y := a.Young(ps, t0); !y["p1"] {
		t.Fatalf("new pointer not young: %v", y)
	}
	if d := a.HoldEnds(t0.Add(time.Second)); d != HoldFor-time.Second {
		t.Fatalf("HoldEnds one second after first sight = %v, want %v", d, HoldFor-time.Second)
	}
	if y := a.Young(ps, t0.Add(HoldFor)); y["p1"] {
		t.Fatalf("pointer still young after HoldFor: %v", y)
	}
	if d := a.HoldEnds(t0.Add(HoldFor)); d != 0 {
		t.Fatalf("HoldEnds after HoldFor = %v, want 0", d)
	}
	a.Young(nil, t0) // p1 gone: forgotten
	if y := a.Young(ps, t0.Add(2*HoldFor)); !y["p1"] {
		t.Fatalf("a pointer seen again is young again: %v", y)
	}
}

// TestComputeRefusesUnvouchedAddresses: a ready row serves only from an
// address inside its participating owner's subnet; every other one is
// counted as refused, whatever the Serving Pointer says.
func TestComputeRefusesUnvouchedAddresses(t *testing.T) {
	rows := []store.Row[store.ContainerBody]{
		crow("ok", "m1", "demo", "web", "10.210.1.2", "d1", true),
		crow("meta", "m1", "demo", "web", "169.254.169.254", "d1", true),
		crow("lo", "m1", "demo", "web", "127.0.0.1", "d1", true),
		crow("other", "m1", "demo", "web", "10.210.2.7", "d1", true),
		crow("ghost", "m9", "demo", "web", "10.210.9.2", "d1", true),
		crow("down", "m1", "demo", "web", "169.254.169.254", "d1", false), // not ready: not refused, not serving
	}
	s := Compute(Input{Machines: testMachines, Containers: rows})["demo/web"]
	if k := keys(s); len(k) != 1 || k[0] != "ok" || s.Refused != 4 {
		t.Fatalf("serving %v, refused %d; want [ok], 4", k, s.Refused)
	}
	named := pointer("demo/web", "p1", store.ServingContainer{ID: "meta", Machine: "m1"}, store.ServingContainer{ID: "ok", Machine: "m1"})
	if k := keys(Compute(Input{Machines: testMachines, Containers: rows, Pointers: []store.Row[store.ServingBody]{named}})["demo/web"]); len(k) != 1 || k[0] != "ok" {
		t.Fatalf("a pointer naming a refused row: serving %v", k)
	}
	for key, want := range map[string]string{"meta": "link-local", "other": "outside", "ghost": "no participating"} {
		i := slices.IndexFunc(rows, func(r store.Row[store.ContainerBody]) bool { return r.Key == key })
		err := testMachines.Vouched(rows[i].Owner, netip.MustParseAddr(rows[i].Body.IP))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), rows[i].Body.IP) {
			t.Errorf("%s: %v, want it to say %q and name the address", key, err, want)
		}
	}
}

// TestMachinesOf: only participating Machines with an IPv4 subnet vouch.
func TestMachinesOf(t *testing.T) {
	m := MachinesOf([]store.Row[store.MachineBody]{
		{Key: "a", Body: store.MachineBody{Phase: Participating, Subnet: "10.210.1.7/24", Session: "s1"}},
		{Key: "b", Body: store.MachineBody{Phase: "joining", Subnet: "10.210.2.0/24"}},
		{Key: "c", Body: store.MachineBody{Phase: Participating, Subnet: "not a prefix"}},
		{Key: "d", Body: store.MachineBody{Phase: Participating, Subnet: "fd00::/64"}},
		{Key: "e", Body: store.MachineBody{Phase: Participating}},
	})
	if len(m.Subnets) != 1 || m.Subnets["a"] != netip.MustParsePrefix("10.210.1.0/24") || m.Sessions["a"] != "s1" {
		t.Fatalf("MachinesOf: %+v", m)
	}
	if err := m.Vouched("a", netip.MustParseAddr("10.210.1.200")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "c", "d", "e"} {
		if m.Vouched(id, netip.MustParseAddr("10.210.2.2")) == nil {
			t.Errorf("machine %s vouched", id)
		}
	}
}

// TestComputeLeavesOutDownMachines: a ready row on a Machine the view
// holds Down does not serve, whatever its row says; the set names the
// Machine; once the view holds it up again the row serves.
func TestComputeLeavesOutDownMachines(t *testing.T) {
	rows := []store.Row[store.ContainerBody]{
		crow("a", "m1", "demo", "web", "10.210.1.2", "d1", true),
		crow("b", "M2", "demo", "web", "10.210.2.2", "d1", true),
		crow("c", "m2", "demo", "api", "10.210.2.3", "d1", true),
	}
	ms := testMachines
	ms.Down = map[string]bool{"m2": true}
	got := Compute(Input{Machines: ms, Containers: rows})
	if k := keys(got["demo/web"]); !slices.Equal(k, []string{"a"}) || !slices.Equal(got["demo/web"].Down, []string{"m2"}) {
		t.Fatalf("web: serving %v, down %v; want [a], [m2]", k, got["demo/web"].Down)
	}
	if api := got["demo/api"]; len(api.Members) != 0 || !slices.Equal(api.Down, []string{"m2"}) {
		t.Fatalf("api, every replica on m2: %+v", api)
	}
	if k := keys(Compute(Input{Machines: testMachines, Containers: rows})["demo/web"]); !slices.Equal(k, []string{"a", "b"}) {
		t.Fatalf("m2 up again: serving %v", k)
	}
}

// TestDownOf: the view's down sites become the ids of the Machines whose
// records name them; sites no record names are ignored.
func TestDownOf(t *testing.T) {
	rows := []store.Row[store.MachineBody]{
		{Key: "M1", Body: store.MachineBody{StoreSite: "s-1"}},
		{Key: "m2", Body: store.MachineBody{StoreSite: "s-2"}},
		{Key: "m3"},
	}
	view := store.Membership{Members: []store.Member{{Site: "s-1", State: "down"}, {Site: "s-2", State: "suspect"}, {Site: "s-9", State: "down"}}}
	if got := DownOf(rows, view); len(got) != 1 || !got["m1"] {
		t.Fatalf("DownOf: %v, want only m1", got)
	}
}

// TestComputeRefusesForgedMachineSubnets: a store writer forges a
// participating machines row whose subnet holds cloud metadata, loopback
// or another network, and a ready containers row inside it. None of those
// addresses ever serves, and each is counted; a row inside the Cluster
// network still serves.
func TestComputeRefusesForgedMachineSubnets(t *testing.T) {
	ms := participatingTable("m1", "10.210.1.0/24", "meta", "169.254.169.0/24", "lo", "127.0.0.0/8",
		"lan", "192.168.1.0/24", "all", "0.0.0.0/0")
	rows := []store.Row[store.ContainerBody]{
		crow("ok", "m1", "demo", "web", "10.210.1.2", "d1", true),
		crow("meta", "meta", "demo", "web", "169.254.169.254", "d1", true),
		crow("lo", "lo", "demo", "web", "127.0.0.1", "d1", true),
		crow("lan", "lan", "demo", "web", "192.168.1.1", "d1", true),
		crow("all", "all", "demo", "web", "239.1.2.3", "d1", true),
	}
	s := Compute(Input{Machines: ms, Containers: rows})["demo/web"]
	if k := keys(s); len(k) != 1 || k[0] != "ok" || s.Refused != 4 {
		t.Fatalf("serving %v, refused %d; want [ok], 4", k, s.Refused)
	}
	for key, want := range map[string]string{"meta": "link-local", "lo": "Cluster network", "lan": "Cluster network", "all": "multicast"} {
		i := slices.IndexFunc(rows, func(r store.Row[store.ContainerBody]) bool { return r.Key == key })
		err := ms.Vouched(rows[i].Owner, netip.MustParseAddr(rows[i].Body.IP))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), rows[i].Body.IP) {
			t.Errorf("%s: %v, want it to say %q and name the address", key, err, want)
		}
	}
	// Without the Cluster network (an older spec, or a test's loopback
	// backends) link-local and multicast are still refused.
	ms.Network = netip.Prefix{}
	if s := Compute(Input{Machines: ms, Containers: rows})["demo/web"]; s.Refused != 2 || len(s.Members) != 3 {
		t.Fatalf("without a network: serving %v, refused %d; want ok, lo and lan, 2", keys(s), s.Refused)
	}
}
