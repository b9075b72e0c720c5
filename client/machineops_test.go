package client

import (
	"context"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/observe"
	"github.com/ployz/ployz/sdk/volume"
)

func TestMachineLabels(t *testing.T) {
	pool, kinds, budget := " tank ", []string{"ingress"}, "4GiB"
	l, err := MachineLabels{Pairs: []string{"a=b"}, Accepts: &kinds, Budget: &budget, ZFSPool: &pool}.Labels()
	if err != nil || l[volume.PoolLabel] != "tank" || l["a"] != "b" || l[rpc.MachineLabelAccepts] != "ingress" || l[observe.BudgetLabel] != "4GiB" {
		t.Fatalf("Labels = %v, %v", l, err)
	}
	if l, err := (MachineLabels{}).Labels(); err != nil || l != nil {
		t.Fatalf("nothing asked: %v, %v", l, err)
	}
	for _, bad := range []string{"", "a/b", "mirror"} {
		if _, err := (MachineLabels{ZFSPool: &bad}).Labels(); err == nil || !strings.Contains(err.Error(), "--zfs-pool") {
			t.Errorf("pool %q: %v, want an error naming --zfs-pool", bad, err)
		}
	}
	bad := "lots"
	if _, err := (MachineLabels{Budget: &bad}).Labels(); err == nil || !strings.Contains(err.Error(), "--observe-budget") {
		t.Errorf("budget %q: %v, want an error naming --observe-budget", bad, err)
	}
	if _, err := (MachineLabels{Accepts: &[]string{"toast"}}).Labels(); err == nil || !strings.Contains(err.Error(), "--accepts") {
		t.Errorf("accepts toast: %v, want an error naming --accepts", err)
	}
	if _, err := (MachineLabels{Pairs: []string{"nokey"}}).Labels(); err == nil {
		t.Error("a pair without = was accepted")
	}
}

func TestAccepts(t *testing.T) {
	for labels, want := range map[*map[string]string]string{
		{}: "all", {rpc.MachineLabelAccepts: ""}: "none", {rpc.MachineLabelAccepts: "builds"}: "builds",
	} {
		if got := Accepts(*labels); got != want {
			t.Errorf("Accepts(%v) = %q, want %q", *labels, got, want)
		}
	}
}

// An update reaches the Machine it names through the entry, and the list
// shows it.
func TestUpdateMachine(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	ctx := context.Background()
	if _, err := s.UpdateMachine(ctx, "m2", rpc.UpdateMachineRequest{LabelsAdd: map[string]string{"zone": "b"}}); err != nil {
		t.Fatal(err)
	}
	if v, _ := fc.Machine("m2").Label("zone"); v != "b" {
		t.Fatalf("m2 zone = %q", v)
	}
	if _, ok := fc.Machine("m1").Label("zone"); ok {
		t.Fatal("m1 got m2's label")
	}
	list, err := s.Machines(ctx)
	if err != nil || len(list.Machines) != 2 || list.ObserverName != "m1" {
		t.Fatalf("Machines = %+v, %v", list, err)
	}
}
