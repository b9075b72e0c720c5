package client

import (
	"context"
	"strings"
	"testing"
)

// TestRemoveMachine: the entry cannot remove itself; a Machine holding
// Containers is planned as holding data (the caller needs its name
// typed); applying resets it and makes the Cluster forget it, and a
// failed reset is partial.
func TestRemoveMachine(t *testing.T) {
	fc, s := newFake(t, "m1", "m2", "m3")
	deployShop(t, s)
	ctx := context.Background()
	if _, err := s.PlanRemoveMachine(ctx, "m1"); err == nil || !strings.Contains(err.Error(), "is the Entry Machine of this connection") {
		t.Fatalf("removing the entry: %v", err)
	}
	mr, err := s.PlanRemoveMachine(ctx, "m2")
	if err != nil || mr.Machine.ID != "id-m2" || !mr.HoldsData || mr.Holds != "1 Service Containers and 0 volumes" {
		t.Fatalf("plan %+v, %v", mr, err)
	}
	m2 := fc.Machine("m2")
	if reset, err := s.ApplyRemoveMachine(ctx, mr, true); err != nil || !reset || !m2.WasReset {
		t.Fatalf("remove m2: reset %t, %v", reset, err)
	}
	if _, err := s.PlanRemoveMachine(ctx, "m2"); err == nil {
		t.Fatal("m2 is still listed after its removal")
	}
	fc.Machine("m3").FailReset = true
	mr, err = s.PlanRemoveMachine(ctx, "m3")
	if err != nil || mr.HoldsData {
		t.Fatalf("plan m3 %+v, %v", mr, err)
	}
	reset, err := s.ApplyRemoveMachine(ctx, mr, true)
	if reset || !IsPartial(err) || !strings.Contains(err.Error(), "removed from the Cluster, but resetting m3 failed") {
		t.Fatalf("a failed reset: reset %t, %v", reset, err)
	}
}
