package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/store/schema"
	"github.com/ployz/ployz/core/store/server"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

func acquireReq(scope, who, nonce string, ttl time.Duration) rpc.AcquireLeaseRequest {
	return rpc.AcquireLeaseRequest{Scope: scope, Holder: rpc.LeaseHolder{Name: who}, Command: "deploy",
		Nonce: nonce, Expires: time.Now().Add(ttl).UnixMilli()}
}

// heldBy reports whether err is a lease-held refusal naming who.
func heldBy(err error, who string) bool {
	var e *rpc.Error
	return errors.As(err, &e) && e.Code == rpc.CodeConflict && e.Details[rpc.DetailLeaseHolder] == who &&
		strings.Contains(e.Message, who) && strings.Contains(e.Message, `"deploy"`)
}

// TestLeaseAcquireConflictRenewRelease: A holds; B is refused naming A;
// A's renew extends; once A releases, B acquires.
func TestLeaseAcquireConflictRenewRelease(t *testing.T) {
	d, st := storeDaemon(t, "m1")
	const scope = "namespace:web-prod"
	res, err := hcall(t, typed(d.acquireLease), acquireReq(scope, "ana", "nonce-ana-1", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if l := res.(rpc.Lease); l.Holder.Name != "ana" || l.Entry != "m1" {
		t.Fatalf("granted %+v", l)
	}
	if _, err := hcall(t, typed(d.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); !heldBy(err, "ana") {
		t.Fatalf("bo's acquire: %v, want held by ana", err)
	}
	if _, err := hcall(t, typed(d.acquireLease), acquireReq("namespace:other", "bo", "nonce-bo-01", time.Minute)); err != nil {
		t.Fatalf("another scope: %v", err)
	}
	later := time.Now().Add(5 * time.Minute).UnixMilli()
	if _, err := hcall(t, typed(d.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-ana-1", Expires: later}); err != nil {
		t.Fatal(err)
	}
	row, _, _ := store.Leases(st).Get(context.Background(), scope)
	if row.Body.Expires != later {
		t.Fatalf("renewed to %d, want %d", row.Body.Expires, later)
	}
	if _, err := hcall(t, typed(d.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-bo-01", Expires: later}); !heldBy(err, "ana") {
		t.Fatalf("bo's renew: %v", err)
	}
	if _, err := hcall(t, typed(d.releaseLease), rpc.ReleaseLeaseRequest{Scope: scope, Nonce: "nonce-bo-01"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.Leases(st).Get(context.Background(), scope); !ok {
		t.Fatal("bo's release freed ana's lease")
	}
	if _, err := hcall(t, typed(d.releaseLease), rpc.ReleaseLeaseRequest{Scope: scope, Nonce: "nonce-ana-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := hcall(t, typed(d.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-ana-1", Expires: later}); err == nil {
		t.Fatal("renew of a released lease succeeded")
	}
	if _, err := hcall(t, typed(d.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); err != nil {
		t.Fatalf("bo after release: %v", err)
	}
	ls, err := hcall(t, typed(d.listLeases), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ls.(rpc.Leases).Leases; len(got) != 2 || got[0].Holder.Name != "bo" {
		t.Fatalf("list %+v", got)
	}
}

// TestLeaseExpiry: a holder that stops renewing frees the scope only
// once its lease expires.
func TestLeaseExpiry(t *testing.T) {
	d, _ := storeDaemon(t, "m1")
	const scope = "volume:pg"
	if _, err := hcall(t, typed(d.acquireLease), acquireReq(scope, "ana", "nonce-ana-1", 700*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := hcall(t, typed(d.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); !heldBy(err, "ana") {
		t.Fatalf("before expiry: %v", err)
	}
	time.Sleep(800 * time.Millisecond)
	if _, err := hcall(t, typed(d.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestLeaseBadInput refuses malformed requests naming the field.
func TestLeaseBadInput(t *testing.T) {
	d, _ := storeDaemon(t, "m1")
	for field, req := range map[string]any{
		"scope":   acquireReq("", "ana", "nonce-ana-1", time.Minute),
		"expires": acquireReq("enroll", "ana", "nonce-ana-1", -time.Minute),
		"nonce":   rpc.ReleaseLeaseRequest{Scope: "enroll"},
	} {
		_, err := hcall(t, typed(d.acquireLease), req)
		if field == "nonce" {
			_, err = hcall(t, typed(d.releaseLease), req)
		}
		var e *rpc.Error
		if !errors.As(err, &e) || e.Details["field"] != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// twoEntries are two participating Daemons on two real store nodes that
// gossip with each other.
func twoEntries(t testing.TB) (*Daemon, *Daemon) {
	t.Helper()
	addr1, addr2 := freeAddr(t), freeAddr(t)
	n1 := startLeaseNode(t, filepath.Join(t.TempDir(), "one.db"), addr1, nil)
	startLeaseNode(t, filepath.Join(t.TempDir(), "two.db"), addr2, []string{n1.GossipAddr()})
	d1, d2 := leaseDaemon(t, "m1", addr1), leaseDaemon(t, "m2", addr2)
	waitMembers(t, d1.active.store)
	waitMembers(t, d2.active.store)
	return d1, d2
}

// startLeaseNode starts a store node on dbPath serving its API on addr,
// gossiping with boot.
func startLeaseNode(t testing.TB, dbPath, addr string, boot []string) *server.Node {
	t.Helper()
	n, err := server.Start(context.Background(), server.Config{DBPath: dbPath, SchemaSQL: schema.SQL(),
		GossipKey: make([]byte, 32), Fast: true, SyncInterval: 100 * time.Millisecond,
		GossipAddr: "127.0.0.1:0", Bootstrap: boot, APIAddr: addr, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// leaseDaemon is a participating Daemon on the store API at addr.
func leaseDaemon(t testing.TB, id, addr string) *Daemon {
	d := &Daemon{cfg: Config{DataDir: t.TempDir(), RunDir: t.TempDir()}, log: hclog.NewNullLogger(),
		rec: machine.Record{ID: id, Name: id, Phase: machine.Participating}, active: &active{store: sdkstore.New(addr, sdkstore.WithToken("tok"))}}
	d.leases.settle = 500 * time.Millisecond
	return d
}

func waitMembers(t testing.TB, st *sdkstore.Client) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if h, err := st.Health(context.Background()); err == nil && h.Members > 0 {
			return
		}
	}
	t.Fatal("store nodes never saw each other")
}

// TestLeaseConcurrentEntries: two operators acquire one scope at once
// through two entries whose stores both accept the write; after the
// merge exactly one holds it and the other is refused naming the winner.
func TestLeaseConcurrentEntries(t *testing.T) {
	d1, d2 := twoEntries(t)
	for round := range 5 {
		scope := "namespace:race-" + string(rune('a'+round))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, d := range []*Daemon{d1, d2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = hcall(t, typed(d.acquireLease), acquireReq(scope, []string{"ana", "bo"}[i], []string{"nonce-ana-1", "nonce-bo-01"}[i], time.Minute))
			}()
		}
		wg.Wait()
		switch {
		case errs[0] == nil && heldBy(errs[1], "ana"), errs[1] == nil && heldBy(errs[0], "bo"):
		default:
			t.Fatalf("round %d: ana %v, bo %v: want exactly one holder, the other refused naming it", round, errs[0], errs[1])
		}
	}
}

// TestLeasePartitionHeal: two entries whose stores cannot reach each
// other each grant the same scope (the documented hazard); once the
// partition heals the rows merge to one, and only that holder's renewal
// succeeds: the other is refused naming the winner, so its command stops.
func TestLeasePartitionHeal(t *testing.T) {
	addr1, addr2 := freeAddr(t), freeAddr(t)
	db2 := filepath.Join(t.TempDir(), "two.db")
	n1 := startLeaseNode(t, filepath.Join(t.TempDir(), "one.db"), addr1, nil)
	n2 := startLeaseNode(t, db2, addr2, nil) // no peer: partitioned from the start
	d1, d2 := leaseDaemon(t, "m1", addr1), leaseDaemon(t, "m2", addr2)
	const scope = "namespace:split"
	if _, err := hcall(t, typed(d1.acquireLease), acquireReq(scope, "ana", "nonce-ana-1", time.Minute)); err != nil {
		t.Fatalf("ana's side: %v", err)
	}
	if _, err := hcall(t, typed(d2.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); err != nil {
		t.Fatalf("bo's side: %v", err)
	}
	n2.Close()
	startLeaseNode(t, db2, addr2, []string{n1.GossipAddr()}) // heal
	waitMembers(t, d2.active.store)
	var winner string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r1, _, _ := store.Leases(d1.active.store).Get(context.Background(), scope)
		r2, _, _ := store.Leases(d2.active.store).Get(context.Background(), scope)
		if r1.Body.Nonce != "" && r1.Body.Nonce == r2.Body.Nonce {
			winner = r1.Body.Holder.Name
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows never merged: %+v / %+v", r1.Body, r2.Body)
		}
	}
	later := time.Now().Add(time.Minute).UnixMilli()
	_, err1 := hcall(t, typed(d1.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-ana-1", Expires: later})
	_, err2 := hcall(t, typed(d2.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-bo-01", Expires: later})
	switch winner {
	case "ana":
		if err1 != nil || !heldBy(err2, "ana") {
			t.Fatalf("ana won: ana's renew %v, bo's %v", err1, err2)
		}
	case "bo":
		if err2 != nil || !heldBy(err1, "bo") {
			t.Fatalf("bo won: bo's renew %v, ana's %v", err2, err1)
		}
	default:
		t.Fatalf("winner %q", winner)
	}
}

// TestLeaseOfDepartedEntry: a live lease granted through a Machine that
// has since been forgotten (its operator's deploy died with it) still
// holds: a second operator's acquire is refused naming the scope, the
// holder and since when, and the row is left as it was. Once the lease
// expires the scope is granted, through this entry.
func TestLeaseOfDepartedEntry(t *testing.T) {
	ctx := context.Background()
	d, st := storeDaemon(t, "m1")
	putMachine(t, st, "m1", "m1", machine.Participating)
	putMachine(t, st, "m-gone", "gone", machine.Participating)
	const scope = "namespace:web-prod"
	started := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	held := sdkstore.Row[store.LeaseBody]{Key: scope, Owner: "m-gone", Body: store.LeaseBody{
		Holder: store.LeaseHolder{Name: "ana@laptop", KeyFingerprint: "SHA256:ana"}, Command: "deploy",
		Started: started.UnixMilli(), Expires: time.Now().Add(time.Second).UnixMilli(), Nonce: "nonce-ana-1", Entry: "m-gone"}}
	if _, err := store.Leases(st).Put(ctx, held); err != nil {
		t.Fatal(err)
	}
	if _, err := hcall(t, typed(d.forgetMachine), rpc.ForgetMachineRequest{ID: "m-gone"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Machines().Get(ctx, "m-gone"); ok {
		t.Fatal("m-gone is still a Machine after forget")
	}

	_, err := hcall(t, typed(d.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute))
	var e *rpc.Error
	if !heldBy(err, "ana@laptop") || !errors.As(err, &e) || e.Details["scope"] != scope ||
		!strings.Contains(e.Message, scope) || !strings.Contains(e.Message, "since "+started.UTC().Format(time.RFC3339)) {
		t.Fatalf("bo's acquire: %v; want a conflict naming %s, ana@laptop and since %s", err, scope, started.UTC().Format(time.RFC3339))
	}
	row, ok, err := store.Leases(st).Get(ctx, scope)
	if err != nil || !ok || row.Owner != held.Owner || row.Body != held.Body {
		t.Fatalf("after the refusal the row is %+v (ok %v, %v); want it unchanged: %+v", row, ok, err, held)
	}

	time.Sleep(time.Until(time.UnixMilli(held.Body.Expires)) + 50*time.Millisecond)
	res, err := hcall(t, typed(d.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute))
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if l := res.(rpc.Lease); l.Holder.Name != "bo" || l.Entry != "m1" || l.Started <= held.Body.Expires-time.Second.Milliseconds() {
		t.Fatalf("granted %+v; want bo's own lease through m1, started now", l)
	}
}
