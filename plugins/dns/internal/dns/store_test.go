package dns

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	miekg "github.com/miekg/dns"

	"github.com/ployz/ployz/core/store/storetest"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// testStore is a real store node on loopback (core/store/storetest)
// holding testMachines.
type testStore struct {
	*storetest.Node
	t *testing.T
}

func startStore(t *testing.T) *testStore {
	t.Helper()
	s := &testStore{Node: storetest.Start(t), t: t}
	s.putMachines(testMachines)
	return s
}

func (s *testStore) client() *store.Client { return store.New(s.API(), store.WithToken(s.Token())) }

func (s *testStore) put(rows ...store.Row[store.ContainerBody]) {
	s.t.Helper()
	for _, r := range rows {
		if _, err := s.client().Containers().Put(context.Background(), r); err != nil {
			s.t.Fatal(err)
		}
	}
}

// putMachines writes a participating machines row with its subnet for
// each of ms's Machines: they vouch for their Containers' addresses.
func (s *testStore) putMachines(ms serving.Machines) {
	s.t.Helper()
	for id, subnet := range ms.Subnets {
		r := store.Row[store.MachineBody]{Key: id, Owner: id, Body: store.MachineBody{Phase: serving.Participating, Subnet: subnet.String()}}
		if _, err := s.client().Machines().Put(context.Background(), r); err != nil {
			s.t.Fatal(err)
		}
	}
}

func freeAddr(t testing.TB, network string) string {
	t.Helper()
	for network == "udp4" { // a port free for both UDP and TCP
		pc, err := net.ListenPacket(network, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp4", pc.LocalAddr().String())
		pc.Close()
		if err == nil {
			l.Close()
			return pc.LocalAddr().String()
		}
	}
	l, err := net.Listen(network, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// writeSpec writes a spec for a loopback listen address and returns its path.
func writeSpec(t *testing.T, dir, listen string, st *testStore, upstreams ...string) string {
	t.Helper()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte(st.Token()+"\n"), 0o600)
	b, _ := json.Marshal(map[string]any{"machine": "m1", "listen": listen, "subnet": "127.0.0.0/8",
		"upstreams": upstreams, "store_api": st.API(), "store_token_file": tok, "unknown_future_field": true})
	p := filepath.Join(dir, "dns.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func logger(t *testing.T) hclog.Logger {
	if testing.Verbose() {
		return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug})
	}
	return hclog.NewNullLogger()
}

// TestServeFromStore runs Serve end to end against a real store: nothing
// is answered before the first load, rows appear and disappear, answers
// survive the store going away, and a changed spec is re-read.
func TestServeFromStore(t *testing.T) {
	st := startStore(t)
	st.put(demoRows()...)
	st.Stop() // the store is down when DNS starts
	up, _ := upstream(t)
	listen := freeAddr(t, "udp4")
	dir := t.TempDir()
	spec := writeSpec(t, dir, listen, st)

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Options{SpecPath: spec, Interval: 50 * time.Millisecond, Log: logger(t),
			OnServing: func(*Handler) { close(served) }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not stop")
		}
	})

	time.Sleep(300 * time.Millisecond)
	if r, err := query(t, listen, "api.demo-prod.internal", miekg.TypeA); err == nil {
		t.Fatalf("answered before the first load from the store: %v", r)
	}
	// A query that arrives before the first load waits in the socket and is
	// answered once the load is in: unanswered, never dropped.
	early, err := net.Dial("udp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	eq := new(miekg.Msg)
	eq.SetQuestion("api.demo-prod.internal.", miekg.TypeA)
	eb, _ := eq.Pack()
	if _, err := early.Write(eb); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	st.Restart()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("no first load after the store came up")
	}
	early.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := early.Read(buf)
	ea := new(miekg.Msg)
	if err != nil || ea.Unpack(buf[:n]) != nil || ea.Id != eq.Id || len(ea.Answer) != 3 {
		t.Fatalf("the query sent before the first load was not answered after it: %v %v", ea, err)
	}
	r, err := query(t, listen, "api.demo-prod.internal", miekg.TypeA)
	if err != nil || len(r.Answer) != 3 {
		t.Fatalf("after load: %v %v", r, err)
	}

	// A Container that stops serving loses its address.
	c2 := row("c2", "m2", "api", "demo-prod", "svc-api", "10.210.2.2", false)
	st.put(c2)
	waitUntil(t, "c2 to leave the answers", 5*time.Second, func() bool {
		r, err := query(t, listen, "api.demo-prod.internal", miekg.TypeA)
		return err == nil && len(r.Answer) == 2 && !slices.Contains(answerIPs(r), "10.210.2.2")
	})

	// The store goes away: the last answers stay.
	st.Stop()
	time.Sleep(300 * time.Millisecond)
	for range 20 {
		r, err := query(t, listen, "api.demo-prod.internal", miekg.TypeA)
		if err != nil || len(r.Answer) != 2 {
			t.Fatalf("store down: %v %v", r, err)
		}
	}
	st.Restart()
	st.put(row("c8", "m3", "web", "demo-prod", "svc-web", "10.210.3.8", true))
	waitUntil(t, "the store to come back", 5*time.Second, func() bool {
		r, err := query(t, listen, "web.demo-prod.internal", miekg.TypeA)
		return err == nil && len(r.Answer) == 1
	})

	// The spec changes its upstreams: re-read in place.
	if r, _ := query(t, listen, "example.com", miekg.TypeA); r == nil || r.Rcode != miekg.RcodeServerFailure {
		t.Fatalf("no upstream yet: %v", r)
	}
	time.Sleep(10 * time.Millisecond) // a distinct mtime
	writeSpec(t, dir, listen, st, up)
	waitUntil(t, "the new upstream", 5*time.Second, func() bool {
		r, err := query(t, listen, "example.com", miekg.TypeA)
		return err == nil && slices.Equal(answerIPs(r), []string{"192.0.2.1"})
	})
	// A spec that no longer validates is not applied: answers continue.
	os.WriteFile(spec, []byte(`{"machine":""}`), 0o644)
	time.Sleep(1500 * time.Millisecond)
	if r, err := query(t, listen, "web.demo-prod.internal", miekg.TypeA); err != nil || len(r.Answer) != 1 {
		t.Fatalf("after a bad spec: %v %v", r, err)
	}
	// A new listen address: Serve ends so systemd starts it on the new one.
	writeSpec(t, dir, freeAddr(t, "udp4"), st)
	select {
	case err := <-done:
		if err != ErrSpecChanged {
			t.Fatalf("Serve = %v, want ErrSpecChanged", err)
		}
		done <- nil
	case <-time.After(5 * time.Second):
		t.Fatal("Serve kept running on the old listen address")
	}
}

func TestProbe(t *testing.T) {
	if err := Probe(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "dns.json")
	os.WriteFile(bad, []byte(`{}`), 0o644)
	if err := Probe(context.Background(), bad); err == nil {
		t.Fatal("probe passed a bad spec")
	}
}
