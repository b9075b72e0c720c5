package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
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

// twoEntries are two participating Daemons on two real store nodes that
// gossip with each other.
func twoEntries(t testing.TB) (*Daemon, *Daemon) {
	t.Helper()
	addr1, addr2 := featuretest.GossipingPair(t)
	d1, d2 := leaseDaemon(t, "m1", addr1), leaseDaemon(t, "m2", addr2)
	return d1, d2
}

// leaseDaemon is a participating Daemon on the store API at addr.
func leaseDaemon(t testing.TB, id, addr string) *Daemon {
	d := &Daemon{cfg: Config{DataDir: t.TempDir(), RunDir: t.TempDir()}, log: hclog.NewNullLogger(),
		rec: machine.Record{ID: id, Name: id, Phase: machine.Participating}, active: &active{store: sdkstore.New(addr, sdkstore.WithToken("tok"))}}
	d.leaseFeature().SettleTime = 500 * time.Millisecond
	return d
}

// The lease commands' own tests are the feature's (feature/leases).

// TestLeaseOfDepartedEntry: a live lease granted through a Machine that
// has since been forgotten (its operator's deploy died with it) still
// holds: a second operator's acquire is refused naming the scope, the
// holder and since when, and the row is left as it was. Once the lease
// expires the scope is granted, through this entry.
func TestLeaseOfDepartedEntry(t *testing.T) {
	ctx := context.Background()
	d, st := storeDaemon(t, "m1")
	featuretest.PutMachine(t, st, "m1", "m1", machine.Participating)
	featuretest.PutMachine(t, st, "m-gone", "gone", machine.Participating)
	const scope = "namespace:web-prod"
	started := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	held := sdkstore.Row[store.LeaseBody]{Key: scope, Owner: "m-gone", Body: store.LeaseBody{
		Holder: store.LeaseHolder{Name: "ana@laptop", KeyFingerprint: "SHA256:ana"}, Command: "deploy",
		Started: started.UnixMilli(), Expires: time.Now().Add(time.Second).UnixMilli(), Nonce: "nonce-ana-1", Entry: "m-gone"}}
	if _, err := store.Leases(st).Put(ctx, held); err != nil {
		t.Fatal(err)
	}
	if _, err := hcall(t, featuretest.Typed(d.forgetMachine), rpc.ForgetMachineRequest{ID: "m-gone"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Machines().Get(ctx, "m-gone"); ok {
		t.Fatal("m-gone is still a Machine after forget")
	}

	_, err := hcall(t, featuretest.Handler(t, d.leaseFeature().Routes(), rpc.CmdAcquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute))
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
	res, err := hcall(t, featuretest.Handler(t, d.leaseFeature().Routes(), rpc.CmdAcquireLease), acquireReq(scope, "bo", "nonce-bo-01", time.Minute))
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if l := res.(rpc.Lease); l.Holder.Name != "bo" || l.Entry != "m1" || l.Started <= held.Body.Expires-time.Second.Milliseconds() {
		t.Fatalf("granted %+v; want bo's own lease through m1, started now", l)
	}
}
