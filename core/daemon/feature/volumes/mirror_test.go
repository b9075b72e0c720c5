package volumes

import (
	"context"
	"errors"
	"testing"

	"github.com/ployz/ployz/core/leasehold"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumerun"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// TestStoredMachines: the Mirror's candidates come from the Cluster's
// participating Machines with their labels (a real store).
func TestStoredMachines(t *testing.T) {
	_, st := newTest(t, "m1")
	ctx := context.Background()
	for _, b := range []sdkstore.MachineBody{{Name: "m2", Phase: "participating", Labels: map[string]string{"zone": "b"}}, {Name: "m3", Phase: "joining", Labels: map[string]string{"zone": "b"}}} {
		if _, err := st.Machines().Put(ctx, sdkstore.Row[sdkstore.MachineBody]{Key: "id-" + b.Name, Owner: "id-" + b.Name, Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := storedMachines(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	got := volprotect.Candidates(volprotect.Mirror{Labels: map[string]string{"zone": "b"}, Every: "15m"}, "m1", ms)
	if len(got) != 1 || got[0] != "m2" {
		t.Fatalf("candidates %v from %+v, want m2 (m3 is not participating)", got, ms)
	}
}

// TestBusyOr: a lease or an open run held by another, before a run
// opened, is busy (tried next round); a run that failed is a failure.
func TestBusyOr(t *testing.T) {
	held := &leasehold.HeldError{Scope: "volume:db", Holder: operator.Operator{Name: "ana"}}
	open := rpc.Errorf(rpc.CodeConflict, "volume db has an open sync run").With("gen", 3)
	var busy *volprotect.BusyError
	if err := busyOr(volumerun.Result{}, held); !errors.As(err, &busy) {
		t.Errorf("held lease: %v", err)
	}
	if err := busyOr(volumerun.Result{}, open); !errors.As(err, &busy) {
		t.Errorf("open run: %v", err)
	}
	if err := busyOr(volumerun.Result{Run: &operator.VolumeRun{Gen: 4}}, errors.New("send: reset")); errors.As(err, &busy) || err == nil {
		t.Errorf("failed run: %v", err)
	}
	if err := busyOr(volumerun.Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "no mirror")); errors.As(err, &busy) {
		t.Errorf("refusal: %v", err)
	}
}
