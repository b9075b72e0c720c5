package allocations

import (
	"errors"
	"testing"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// storeFeature is the feature on Machine self over a fresh store.
func storeFeature(t *testing.T, self string) (*Feature, *sdkstore.Client) {
	t.Helper()
	h, st := featuretest.Store(t, self)
	return New(h), st
}

func putAlloc(t *testing.T, d *Feature, a rpc.Allocation) (rpc.Allocation, error) {
	t.Helper()
	if a.Operator.Name == "" {
		a.Operator.Name = "ana"
	}
	out, err := featuretest.Call(t, featuretest.Typed(d.putAllocation), rpc.PutAllocationRequest{Allocation: a})
	if err != nil {
		return rpc.Allocation{}, err
	}
	return out.(rpc.Allocation), nil
}

func wantCode(t *testing.T, err error, code, field string) {
	t.Helper()
	var e *rpc.Error
	if !errors.As(err, &e) || e.Code != code || (field != "" && e.Details["field"] != field) {
		t.Fatalf("got %v, want %s naming %q", err, code, field)
	}
}

// TestAllocationHistory: an allocation is written to the store and moves
// through its states keeping its subnet and first stamp; a second
// Machine asking for a subnet in the history, or a published Machine's,
// is refused, and so is a Machine asking for a subnet other than its
// own; a malformed request is refused naming the field and writes
// nothing.
func TestAllocationHistory(t *testing.T) {
	d, st := storeFeature(t, "m1id")
	first, err := putAlloc(t, d, rpc.Allocation{MachineID: "m3id", MachineName: "m3", Subnet: "10.210.3.0/24", State: "allocated"})
	if err != nil || first.CreatedAt == 0 || first.State != "allocated" {
		t.Fatalf("first allocation %+v %v", first, err)
	}
	row, ok, err := store.Allocations(st).Get(t.Context(), "m3id")
	if err != nil || !ok || row.Body.Subnet != "10.210.3.0/24" || row.Owner != "m1id" || row.Body.Operator.Name != "ana" {
		t.Fatalf("row %+v %v %v", row, ok, err)
	}
	joined, err := putAlloc(t, d, rpc.Allocation{MachineID: "m3id", Subnet: "10.210.3.0/24", State: "joined", Operator: store.HistoryOperator{Name: "ben"}})
	if err != nil || joined.State != "joined" || joined.CreatedAt != first.CreatedAt || joined.MachineName != "m3" || joined.Operator.Name != "ana" {
		t.Fatalf("joined %+v %v", joined, err)
	}
	_, err = putAlloc(t, d, rpc.Allocation{MachineID: "m4id", Subnet: "10.210.3.0/24", State: "allocated"})
	wantCode(t, err, rpc.CodeConflict, "subnet")
	_, err = putAlloc(t, d, rpc.Allocation{MachineID: "m3id", Subnet: "10.210.9.0/24", State: "allocated"})
	wantCode(t, err, rpc.CodeConflict, "subnet")
	if _, err := st.Machines().Put(t.Context(), sdkstore.Row[sdkstore.MachineBody]{Key: "m2id", Owner: "m2id", Body: sdkstore.MachineBody{Name: "m2", Subnet: "10.210.2.0/24"}}); err != nil {
		t.Fatal(err)
	}
	_, err = putAlloc(t, d, rpc.Allocation{MachineID: "m4id", Subnet: "10.210.2.0/24", State: "allocated"})
	wantCode(t, err, rpc.CodeConflict, "subnet")
	for field, a := range map[string]rpc.Allocation{
		"subnet":     {MachineID: "m5id", Subnet: "10.210.5.0/33", State: "allocated"},
		"machine_id": {MachineID: "m5/id", Subnet: "10.210.5.0/24", State: "allocated"},
		"state":      {MachineID: "m5id", Subnet: "10.210.5.0/24", State: "gone"},
	} {
		_, err := putAlloc(t, d, a)
		wantCode(t, err, rpc.CodeInvalidArgument, field)
	}
	out, err := featuretest.Call(t, featuretest.Typed(d.listAllocations), struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if l := out.(rpc.Allocations).Allocations; len(l) != 1 || l[0].MachineID != "m3id" || l[0].State != "joined" {
		t.Fatalf("history %+v", l)
	}
}

// TestRemovalMarks: a mark is kept once per namespace (the first
// operator's), listed, and cleared; clearing again is no error; a
// malformed request is refused naming the field.
func TestRemovalMarks(t *testing.T) {
	d, st := storeFeature(t, "m1id")
	mark := func(project, op string) (rpc.RemovalMark, error) {
		out, err := featuretest.Call(t, featuretest.Typed(d.markRemoval), rpc.MarkRemovalRequest{RemovalMark: rpc.RemovalMark{Project: project, Environment: "production",
			Operator: store.HistoryOperator{Name: op}}})
		if err != nil {
			return rpc.RemovalMark{}, err
		}
		return out.(rpc.RemovalMark), nil
	}
	first, err := mark("shop", "ana")
	if err != nil || first.CreatedAt == 0 {
		t.Fatal(first, err)
	}
	if again, err := mark("shop", "ben"); err != nil || again.Operator.Name != "ana" || again.CreatedAt != first.CreatedAt {
		t.Fatalf("second mark %+v %v", again, err)
	}
	if _, err := mark("blog", "ben"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.Removals(st).Get(t.Context(), "shop-production"); !ok {
		t.Fatal("no removals row keyed by the namespace")
	}
	list := func() []rpc.RemovalMark {
		out, err := featuretest.Call(t, featuretest.Typed(d.listRemovals), struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		return out.(rpc.RemovalMarks).Removals
	}
	if l := list(); len(l) != 2 || l[0].Project != "blog" || l[1].Project != "shop" {
		t.Fatalf("marks %+v", l)
	}
	for range 2 {
		if _, err := featuretest.Call(t, featuretest.Typed(d.clearRemoval), rpc.ClearRemovalRequest{Project: "shop", Environment: "production"}); err != nil {
			t.Fatal(err)
		}
	}
	if l := list(); len(l) != 1 || l[0].Project != "blog" {
		t.Fatalf("after clearing shop: %+v", l)
	}
	_, err = mark("a b", "ana")
	wantCode(t, err, rpc.CodeInvalidArgument, "project")
	_, err = featuretest.Call(t, featuretest.Typed(d.clearRemoval), rpc.ClearRemovalRequest{Project: "shop"})
	wantCode(t, err, rpc.CodeInvalidArgument, "environment")
	if l := list(); len(l) != 1 {
		t.Fatalf("a refused request changed the marks: %+v", l)
	}
}
