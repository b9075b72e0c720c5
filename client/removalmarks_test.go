package client

import (
	"context"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/fakecluster"
)

// TestRemovalMarkFinishedByAnotherOperator: A's `project rm` of shop is
// killed right after it marked the removal in the Cluster; B, on another
// computer with an empty operator store, sees the mark, and B's next
// removal (of another project) finishes shop's too and clears the mark.
func TestRemovalMarkFinishedByAnotherOperator(t *testing.T) {
	fc, a := newFake(t, "m1", "m2")
	ctx := context.Background()
	deployShop(t, a)
	if err := a.markRemoval(ctx, "shop", "production"); err != nil {
		t.Fatal(err)
	}
	if local, _ := a.st.Removals("lab"); len(local) != 0 {
		t.Fatalf("A's computer keeps the mark %+v: the Cluster answers", local)
	}
	st, ent := fc.NewSession()
	b := New(st, ent, "lab")
	if marks, err := b.Removals(ctx); err != nil || len(marks) != 1 || marks[0].Project != "shop" || !b.Removing(ctx)["shop-production"] {
		t.Fatalf("B sees the marks %+v, %v", marks, err)
	}
	rm, err := b.RemoveProject(ctx, "blog", "production", Hooks{})
	if err != nil || len(rm.Removals) != 2 {
		t.Fatalf("B's removal: %+v, %v", rm, err)
	}
	for _, r := range rm.Removals {
		if r.Status != "done" {
			t.Fatalf("removal of %s: %+v", r.Namespace(), r)
		}
	}
	if ids := fc.ContainerIDs(); len(ids) != 0 {
		t.Fatalf("shop's Containers left: %v", ids)
	}
	if marks := fc.RemovalMarks(); len(marks) != 0 {
		t.Fatalf("marks left in the Cluster: %+v", marks)
	}
}

// TestRemovalMarksFallBackForAnOlderEntry: an entry that keeps no marks
// leaves them in this computer's store, as before.
func TestRemovalMarksFallBackForAnOlderEntry(t *testing.T) {
	fc := fakecluster.NewWith(t, fakecluster.Options{Unsupported: []string{rpc.CmdMarkRemoval, rpc.CmdClearRemoval, rpc.CmdListRemovals}}, "m1")
	s := New(fc.Store, fc.Entry, "lab")
	ctx := context.Background()
	if err := s.markRemoval(ctx, "shop", "production"); err != nil {
		t.Fatal(err)
	}
	if marks, err := s.Removals(ctx); err != nil || len(marks) != 1 {
		t.Fatalf("marks %+v, %v", marks, err)
	}
	if local, _ := fc.Store.Removals("lab"); len(local) != 1 {
		t.Fatalf("local marks %+v", local)
	}
	if err := s.clearRemoval(ctx, "shop", "production"); err != nil {
		t.Fatal(err)
	}
	if marks, _ := s.Removals(ctx); len(marks) != 0 {
		t.Fatalf("marks after clearing %+v", marks)
	}
}
