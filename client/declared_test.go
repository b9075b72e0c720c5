package client

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/fakecluster"
)

// TestTeammateSeesDeclared: what ls and ps declare is the Cluster's
// latest revision of every namespace, so B, on a computer that never
// deployed, sees A's web desired 2 and finds its project; once A removes
// the project B declares nothing.
func TestTeammateSeesDeclared(t *testing.T) {
	fc, a := newFake(t, "m1", "m2")
	ctx := context.Background()
	deployShop(t, a)
	st, ent := fc.NewSession()
	b := New(st, ent, "lab")
	if local, _ := b.localLatestSaved(); len(local) != 0 {
		t.Fatalf("B's computer holds %+v before anything", local)
	}
	rows, _, err := b.Services(ctx, "shop-production")
	if err != nil || len(rows) != 1 || rows[0].Desired != "2" {
		t.Fatalf("B's ls: %+v, %v; want web desired 2", rows, err)
	}
	if p, err := b.ProjectOf(ctx, "shop-production"); err != nil || p.Name != "shop" || p.Environment != "production" {
		t.Fatalf("B's project of shop-production: %+v, %v", p, err)
	}
	if _, err := a.RemoveProject(ctx, "shop", "production", Hooks{}); err != nil {
		t.Fatal(err)
	}
	if saved, err := b.LatestSaved(ctx); err != nil || len(saved) != 0 {
		t.Fatalf("B after A's removal: %+v, %v", saved, err)
	}
}

// TestDeclaredFromAnOlderEntry: an entry that keeps no revisions leaves
// the declarations to this computer's store.
func TestDeclaredFromAnOlderEntry(t *testing.T) {
	fc := fakecluster.NewWith(t, fakecluster.Options{Unsupported: []string{rpc.CmdListRevisions, rpc.CmdSaveRevision}}, "m1", "m2")
	s := New(fc.Store, fc.Entry, "lab")
	deployShop(t, s)
	saved, err := s.LatestSaved(context.Background())
	if err != nil || len(saved) != 1 || saved[0].Project != "shop" {
		t.Fatalf("from this computer's store: %+v, %v", saved, err)
	}
}

// TestTeammateFindsTheOnlyProject: B, with no compose file and no
// --project-name, acts on the one project the Cluster holds, though B's
// computer never saved it.
func TestTeammateFindsTheOnlyProject(t *testing.T) {
	fc, a := newFake(t, "m1", "m2")
	deployShop(t, a)
	st, ent := fc.NewSession()
	b := New(st, ent, "lab")
	missing := filepath.Join(t.TempDir(), "compose.yaml")
	if ns, err := b.Namespace(context.Background(), "", "production", missing); err != nil || ns != "shop-production" {
		t.Fatalf("B's namespace: %q, %v", ns, err)
	}
}
