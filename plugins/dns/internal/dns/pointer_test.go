package dns

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	miekg "github.com/miekg/dns"

	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

func deployed(key, owner, ip, dep string, ready bool) store.Row[store.ContainerBody] {
	r := row(key, owner, "web", "demo-prod", "svc-web", ip, ready)
	r.Body.Deployment = dep
	return r
}

func pointerTo(id string, keys ...string) store.Row[store.ServingBody] {
	p := store.Row[store.ServingBody]{Key: "demo-prod/web", Body: store.ServingBody{ID: id}}
	for _, k := range keys {
		p.Body.Containers = append(p.Body.Containers, store.ServingContainer{ID: k})
	}
	return p
}

// both asks name over UDP and over TCP and returns the sorted A answers,
// failing unless both transports agree.
func both(t *testing.T, addr, name string) (string, []string) {
	t.Helper()
	var first []string
	var rc string
	for _, n := range []string{"udp", "tcp"} {
		m := new(miekg.Msg)
		m.SetQuestion(miekg.Fqdn(name), miekg.TypeA)
		r, _, err := (&miekg.Client{Net: n, Timeout: time.Second}).Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s %s: %v", n, name, err)
		}
		got := answerIPs(r)
		slices.Sort(got)
		if n == "udp" {
			first, rc = got, miekg.RcodeToString[r.Rcode]
		} else if !slices.Equal(got, first) || rc != miekg.RcodeToString[r.Rcode] {
			t.Fatalf("%s: udp %s %v, tcp %s %v", name, rc, first, miekg.RcodeToString[r.Rcode], got)
		}
	}
	return rc, first
}

// TestFollowsServingPointer: during a redeploy the answers hold only the
// Containers the Serving Pointer names; the superseded ones drop out once
// it moves, and a pointer that moved before its Containers' ready rows
// arrived keeps the previous answers (as ingress does).
func TestFollowsServingPointer(t *testing.T) {
	h := NewHandler(testCfg(t), nil)
	addr := serve(t, h)
	rows := []store.Row[store.ContainerBody]{
		deployed("old1", "m1", "10.210.1.2", "d1", true),
		deployed("old2", "m2", "10.210.2.2", "d1", true),
		deployed("new1", "m1", "10.210.1.3", "d2", true), // ready, not yet named
		deployed("new2", "m2", "10.210.2.3", "d2", false),
	}
	load := func(in serving.Input) {
		if old := h.table.Load(); old != nil {
			in.Prev = old.Sets()
		}
		h.SetTable(Build(in))
	}
	expect := func(step string, want ...string) {
		t.Helper()
		for _, name := range []string{"web.demo-prod.internal", "web.demo-prod.nearest.internal", "svc-web.id.lookup.internal"} {
			rc, got := both(t, addr, name)
			if rc != "NOERROR" || !slices.Equal(got, want) {
				t.Fatalf("%s: %s = %s %v, want %v", step, name, rc, got, want)
			}
		}
	}
	p1 := []store.Row[store.ServingBody]{pointerTo("p1", "old1", "old2")}
	load(serving.Input{Machines: testMachines, Containers: rows, Pointers: p1})
	expect("pointer on the old deployment", "10.210.1.2", "10.210.2.2")

	// The pointer moves while new2 is not ready: only new1 answers.
	p2 := []store.Row[store.ServingBody]{pointerTo("p2", "new1", "new2")}
	load(serving.Input{Machines: testMachines, Containers: rows, Pointers: p2, Young: map[string]bool{"p2": true}})
	expect("pointer moved", "10.210.1.3")
	rows[3].Body.Ready = true
	load(serving.Input{Machines: testMachines, Containers: rows, Pointers: p2})
	expect("new2 ready", "10.210.1.3", "10.210.2.3")

	// A young pointer none of whose Containers is seen ready yet holds
	// the previous answers; once old, it answers what it names (nothing).
	p3 := []store.Row[store.ServingBody]{pointerTo("p3", "new3")}
	load(serving.Input{Machines: testMachines, Containers: rows, Pointers: p3, Young: map[string]bool{"p3": true}})
	expect("young pointer held", "10.210.1.3", "10.210.2.3")
	load(serving.Input{Machines: testMachines, Containers: rows, Pointers: p3})
	if rc, got := both(t, addr, "web.demo-prod.internal"); rc != "NXDOMAIN" || len(got) != 0 {
		t.Fatalf("pointer past its hold naming nothing ready: %s %v", rc, got)
	}
}

// from returns a client whose queries leave from the loopback address ip.
func from(n, ip string) *miekg.Client {
	var local net.Addr = &net.UDPAddr{IP: net.ParseIP(ip)}
	if n == "tcp" {
		local = &net.TCPAddr{IP: net.ParseIP(ip)}
	}
	return &miekg.Client{Net: n, Timeout: time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: time.Second}}
}

// TestShortNameInCallersNamespace: <service>.internal resolves in the
// namespace of the Container the query comes from (by source address).
func TestShortNameInCallersNamespace(t *testing.T) {
	h := NewHandler(testCfg(t), nil)
	// The callers are loopback test clients: their Machine "lo" holds
	// 127.0.0.0/8, so their rows' addresses are vouched for.
	ms := serving.Machines{Subnets: maps.Clone(testMachines.Subnets)}
	ms.Subnets["lo"] = netip.MustParsePrefix("127.0.0.0/8")
	h.SetTable(NewTable(ms, []store.Row[store.ContainerBody]{
		row("caller-a", "lo", "client", "demo-prod", "svc-client", "127.0.0.5", true),
		row("caller-b", "lo", "client", "demo-stage", "svc-client-b", "127.0.0.6", false), // not ready: still a caller
		row("api-prod", "m1", "api", "demo-prod", "svc-api", "10.210.1.2", true),
		row("api-stage", "m2", "api", "demo-stage", "svc-api-b", "10.210.2.9", true),
	}))
	addr := serve(t, h)
	cases := []struct{ src, rc, want string }{
		{"127.0.0.5", "NOERROR", "10.210.1.2"},
		{"127.0.0.6", "NOERROR", "10.210.2.9"},
		{"127.0.0.9", "NXDOMAIN", ""}, // no Container holds it
	}
	for _, c := range cases {
		for _, n := range []string{"udp", "tcp"} {
			m := new(miekg.Msg)
			m.SetQuestion("Api.internal.", miekg.TypeA)
			r, _, err := from(n, c.src).Exchange(m, addr)
			if err != nil {
				t.Fatalf("%s from %s: %v", n, c.src, err)
			}
			got := answerIPs(r)
			if miekg.RcodeToString[r.Rcode] != c.rc || (c.want != "" && !slices.Equal(got, []string{c.want})) || (c.want == "" && len(got) != 0) {
				t.Fatalf("%s from %s: %s %v, want %s %s", n, c.src, miekg.RcodeToString[r.Rcode], got, c.rc, c.want)
			}
			if len(r.Answer) > 0 && r.Answer[0].Header().Name != "Api.internal." {
				t.Fatalf("answer owner %q, want the question's name", r.Answer[0].Header().Name)
			}
		}
	}
	// A Service the caller's namespace does not have: NXDOMAIN.
	m := new(miekg.Msg)
	m.SetQuestion("db.internal.", miekg.TypeA)
	if r, _, err := from("udp", "127.0.0.5").Exchange(m, addr); err != nil || r.Rcode != miekg.RcodeNameError {
		t.Fatalf("db.internal: %v %v", r, err)
	}
}

// TestPTRForContainerAddresses: a Container address maps back to its
// Service's name; other addresses of the Cluster never leave the Machine.
func TestPTRForContainerAddresses(t *testing.T) {
	up, _ := upstream(t)
	cfg := testCfg(t, up)
	cfg.NetworkPrefix = mustPrefix("10.210.0.0/16")
	h := NewHandler(cfg, nil)
	rows := demoRows()
	// An address Docker handed on: the exited holder loses it to the running one.
	gone := row("c0", "m2", "old", "demo-prod", "svc-old", "10.210.2.2", false)
	gone.Body.State = "exited"
	h.SetTable(NewTable(testMachines, append([]store.Row[store.ContainerBody]{gone}, rows...)))
	addr := serve(t, h)
	ptr := func(n, name string, qt uint16) *miekg.Msg {
		t.Helper()
		m := new(miekg.Msg)
		m.SetQuestion(name, qt)
		r, _, err := (&miekg.Client{Net: n, Timeout: time.Second}).Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s %s: %v", n, name, err)
		}
		return r
	}
	for _, n := range []string{"udp", "tcp"} {
		for name, want := range map[string]string{
			"2.1.210.10.in-addr.arpa.": "api.demo-prod.internal.",
			"2.2.210.10.in-addr.arpa.": "api.demo-prod.internal.",
			"3.2.210.10.in-addr.arpa.": "api.demo-prod.internal.", // not ready: still its address
			"9.3.210.10.in-addr.arpa.": "db.demo-prod.internal.",
		} {
			r := ptr(n, name, miekg.TypePTR)
			if r.Rcode != miekg.RcodeSuccess || !r.Authoritative || len(r.Answer) != 1 {
				t.Fatalf("%s PTR %s: %v", n, name, r)
			}
			if p, ok := r.Answer[0].(*miekg.PTR); !ok || p.Ptr != want || p.Hdr.Name != name {
				t.Fatalf("%s PTR %s: %v, want %s", n, name, r.Answer[0], want)
			}
		}
		// The name exists; other types are empty NOERROR.
		if r := ptr(n, "2.1.210.10.in-addr.arpa.", miekg.TypeA); r.Rcode != miekg.RcodeSuccess || len(r.Answer) != 0 {
			t.Fatalf("A on a reverse name: %v", r)
		}
		// Inside the Cluster network, no Container: NXDOMAIN, not forwarded.
		if r := ptr(n, "77.9.210.10.in-addr.arpa.", miekg.TypePTR); r.Rcode != miekg.RcodeNameError || !r.Authoritative {
			t.Fatalf("unheld Cluster address: %v", r)
		}
	}
	// Outside the Cluster: forwarded (the test upstream answers NXDOMAIN,
	// not authoritatively).
	if r := ptr("udp", "8.8.8.8.in-addr.arpa.", miekg.TypePTR); r.Rcode != miekg.RcodeNameError || r.Authoritative {
		t.Fatalf("outside address: %v", r)
	}
}

// TestEDNS0: a query with an OPT record gets one back (RFC 6891), with the
// DO bit mirrored; an unknown EDNS version is BADVERS; a query without
// OPT gets none.
func TestEDNS0(t *testing.T) {
	up, _ := upstream(t)
	h := NewHandler(testCfg(t, up), nil)
	h.SetTable(NewTable(testMachines, demoRows()))
	addr := serve(t, h)
	for _, n := range []string{"udp", "tcp"} {
		for _, name := range []string{"api.demo-prod.internal.", "nope.demo-prod.internal.", "2.1.210.10.in-addr.arpa.", "example.com."} {
			for _, do := range []bool{false, true} {
				m := new(miekg.Msg)
				m.SetQuestion(name, miekg.TypeA)
				m.SetEdns0(4096, do)
				r, _, err := (&miekg.Client{Net: n, Timeout: time.Second}).Exchange(m, addr)
				if err != nil {
					t.Fatalf("%s %s: %v", n, name, err)
				}
				o := r.IsEdns0()
				if o == nil || o.Version() != 0 || o.Do() != do || o.UDPSize() < 512 {
					t.Fatalf("%s %s do=%v: OPT %v in %v", n, name, do, o, r)
				}
			}
			m := new(miekg.Msg)
			m.SetQuestion(name, miekg.TypeA)
			r, _, err := (&miekg.Client{Net: n, Timeout: time.Second}).Exchange(m, addr)
			if err != nil || r.IsEdns0() != nil {
				t.Fatalf("%s %s without EDNS0: OPT in %v %v", n, name, r, err)
			}
		}
		m := new(miekg.Msg)
		m.SetQuestion("api.demo-prod.internal.", miekg.TypeA)
		m.SetEdns0(4096, false)
		m.IsEdns0().SetVersion(1)
		r, _, err := (&miekg.Client{Net: n, Timeout: time.Second}).Exchange(m, addr)
		if err != nil || r.Rcode != miekg.RcodeBadVers || r.IsEdns0() == nil || len(r.Answer) != 0 {
			t.Fatalf("%s EDNS version 1: %v %v", n, r, err)
		}
	}
	if got := answerIPs(mustEDNS(t, addr)); len(got) != 3 {
		t.Fatalf("answers with EDNS0: %v", got)
	}
}

func mustEDNS(t *testing.T, addr string) *miekg.Msg {
	t.Helper()
	m := new(miekg.Msg)
	m.SetQuestion("api.demo-prod.internal.", miekg.TypeA)
	m.SetEdns0(1232, false)
	r, _, err := (&miekg.Client{Timeout: time.Second}).Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
