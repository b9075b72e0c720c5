package leases

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
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
	f, st := newTest(t, "m1")
	const scope = "namespace:web-prod"
	res, err := featuretest.Call(t, featuretest.Typed(f.acquireLease), acquireReq(scope, "ana", "nonce-ana-1", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if l := res.(rpc.Lease); l.Holder.Name != "ana" || l.Entry != "m1" {
		t.Fatalf("granted %+v", l)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); !heldBy(err, "ana") {
		t.Fatalf("bo's acquire: %v, want held by ana", err)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.acquireLease), acquireReq("namespace:other", "bo", "nonce-bo-01", time.Minute)); err != nil {
		t.Fatalf("another scope: %v", err)
	}
	later := time.Now().Add(5 * time.Minute).UnixMilli()
	if _, err := featuretest.Call(t, featuretest.Typed(f.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-ana-1", Expires: later}); err != nil {
		t.Fatal(err)
	}
	row, _, _ := store.Leases(st).Get(context.Background(), scope)
	if row.Body.Expires != later {
		t.Fatalf("renewed to %d, want %d", row.Body.Expires, later)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-bo-01", Expires: later}); !heldBy(err, "ana") {
		t.Fatalf("bo's renew: %v", err)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.releaseLease), rpc.ReleaseLeaseRequest{Scope: scope, Nonce: "nonce-bo-01"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.Leases(st).Get(context.Background(), scope); !ok {
		t.Fatal("bo's release freed ana's lease")
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.releaseLease), rpc.ReleaseLeaseRequest{Scope: scope, Nonce: "nonce-ana-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-ana-1", Expires: later}); err == nil {
		t.Fatal("renew of a released lease succeeded")
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); err != nil {
		t.Fatalf("bo after release: %v", err)
	}
	ls, err := featuretest.Call(t, featuretest.Typed(f.listLeases), nil)
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
	f, _ := newTest(t, "m1")
	const scope = "volume:pg"
	if _, err := featuretest.Call(t, featuretest.Typed(f.acquireLease), acquireReq(scope, "ana", "nonce-ana-1", 700*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); !heldBy(err, "ana") {
		t.Fatalf("before expiry: %v", err)
	}
	time.Sleep(800 * time.Millisecond)
	if _, err := featuretest.Call(t, featuretest.Typed(f.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestLeaseBadInput refuses malformed requests naming the field.
func TestLeaseBadInput(t *testing.T) {
	f, _ := newTest(t, "m1")
	for field, req := range map[string]any{
		"scope":   acquireReq("", "ana", "nonce-ana-1", time.Minute),
		"expires": acquireReq("enroll", "ana", "nonce-ana-1", -time.Minute),
		"nonce":   rpc.ReleaseLeaseRequest{Scope: "enroll"},
	} {
		_, err := featuretest.Call(t, featuretest.Typed(f.acquireLease), req)
		if field == "nonce" {
			_, err = featuretest.Call(t, featuretest.Typed(f.releaseLease), req)
		}
		var e *rpc.Error
		if !errors.As(err, &e) || e.Details["field"] != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// twoEntries are two Machines' lease features on two real store nodes
// that gossip with each other.
func twoEntries(t testing.TB) (*Feature, *Feature) {
	t.Helper()
	addr1, addr2 := featuretest.FreeAddr(t), featuretest.FreeAddr(t)
	n1 := featuretest.StartNode(t, filepath.Join(t.TempDir(), "one.db"), addr1, nil)
	featuretest.StartNode(t, filepath.Join(t.TempDir(), "two.db"), addr2, []string{n1.GossipAddr()})
	f1, f2 := entry(t, "m1", addr1), entry(t, "m2", addr2)
	featuretest.WaitMembers(t, storeOf(f1))
	featuretest.WaitMembers(t, storeOf(f2))
	return f1, f2
}

// entry is Machine id's lease feature on the store API at addr.
func entry(t testing.TB, id, addr string) *Feature {
	f := New(featuretest.StoreHost{St: sdkstore.New(addr, sdkstore.WithToken("tok")), Self: id, Dir: t.TempDir()}, hclog.NewNullLogger())
	f.SettleTime = 500 * time.Millisecond
	return f
}

// storeOf is the store client f writes through.
func storeOf(f *Feature) *sdkstore.Client {
	st, _ := f.host.Store()
	return st
}

// newTest is Machine self's lease feature over a new store node.
func newTest(t testing.TB, self string) (*Feature, *sdkstore.Client) {
	t.Helper()
	h, st := featuretest.Store(t, self)
	return New(h, hclog.NewNullLogger()), st
}

// TestLeaseConcurrentEntries: two operators acquire one scope at once
// through two entries whose stores both accept the write; after the
// merge exactly one holds it and the other is refused naming the winner.
func TestLeaseConcurrentEntries(t *testing.T) {
	f1, f2 := twoEntries(t)
	for round := range 5 {
		scope := "namespace:race-" + string(rune('a'+round))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, f := range []*Feature{f1, f2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = featuretest.Call(t, featuretest.Typed(f.acquireLease), acquireReq(scope, []string{"ana", "bo"}[i], []string{"nonce-ana-1", "nonce-bo-01"}[i], time.Minute))
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
	addr1, addr2 := featuretest.FreeAddr(t), featuretest.FreeAddr(t)
	db2 := filepath.Join(t.TempDir(), "two.db")
	n1 := featuretest.StartNode(t, filepath.Join(t.TempDir(), "one.db"), addr1, nil)
	n2 := featuretest.StartNode(t, db2, addr2, nil) // no peer: partitioned from the start
	f1, f2 := entry(t, "m1", addr1), entry(t, "m2", addr2)
	const scope = "namespace:split"
	if _, err := featuretest.Call(t, featuretest.Typed(f1.acquireLease), acquireReq(scope, "ana", "nonce-ana-1", time.Minute)); err != nil {
		t.Fatalf("ana's side: %v", err)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f2.acquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute)); err != nil {
		t.Fatalf("bo's side: %v", err)
	}
	n2.Close()
	featuretest.StartNode(t, db2, addr2, []string{n1.GossipAddr()}) // heal
	featuretest.WaitMembers(t, storeOf(f2))
	var winner string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r1, _, _ := store.Leases(storeOf(f1)).Get(context.Background(), scope)
		r2, _, _ := store.Leases(storeOf(f2)).Get(context.Background(), scope)
		if r1.Body.Nonce != "" && r1.Body.Nonce == r2.Body.Nonce {
			winner = r1.Body.Holder.Name
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows never merged: %+v / %+v", r1.Body, r2.Body)
		}
	}
	later := time.Now().Add(time.Minute).UnixMilli()
	_, err1 := featuretest.Call(t, featuretest.Typed(f1.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-ana-1", Expires: later})
	_, err2 := featuretest.Call(t, featuretest.Typed(f2.renewLease), rpc.RenewLeaseRequest{Scope: scope, Nonce: "nonce-bo-01", Expires: later})
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
