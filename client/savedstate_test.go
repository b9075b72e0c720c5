package client

import (
	"context"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// TestTeammateSeesRevisionsAndRollsBack: operator A deploys and scales;
// operator B, another computer with an empty store, sees A's history,
// continues A's revision numbers and rolls back to A's first revision
// (its deploy record says it completed) from the Cluster alone.
func TestTeammateSeesRevisionsAndRollsBack(t *testing.T) {
	t.Setenv(operator.EnvOperator, "")
	fc, a := newFake(t, "m1", "m2")
	ctx := context.Background()
	shop := Project{Name: "shop", Environment: deploy.DefaultEnvironment}
	if err := a.Store().SaveContext(operator.Context{Name: "lab", Connections: []operator.Connection{{URL: fc.EntryURL()}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Store().SetOperatorName("lab", "ana"); err != nil {
		t.Fatal(err)
	}
	deployShop(t, a)
	dp, err := a.PlanScale(ctx, shop, "web", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ApplyDeploy(ctx, dp, Hooks{}); err != nil {
		t.Fatal(err)
	}

	st, ent := fc.NewSession()
	if err := st.SaveContext(operator.Context{Name: "lab", Connections: []operator.Connection{{URL: fc.EntryURL()}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetOperatorName("lab", "bo"); err != nil {
		t.Fatal(err)
	}
	b := New(st, ent, "lab")
	hist, err := b.History(ctx, HistoryFilter{})
	if err != nil || len(hist) != 2 || hist[0].Operator.Name != "ana" || hist[0].Kind != rpc.HistoryScale || hist[0].Revision != 2 {
		t.Fatalf("B's view of the history: %+v, %v", hist, err)
	}
	rb, err := b.PlanRollback(ctx, shop, 0, false, 0)
	if err != nil {
		t.Fatalf("B's rollback: %v", err)
	}
	if rb.Why != "rollback to revision 1" {
		t.Fatalf("B's rollback: %q", rb.Why)
	}
	if _, err := b.ApplyDeploy(ctx, rb, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if got := len(fc.Running()); got != 2 {
		t.Fatalf("%d running after the rollback to 2 replicas", got)
	}
	revs := fc.Revisions("shop-production")
	var who []string
	for _, r := range revs {
		who = append(who, r.Operator.Name)
	}
	if len(revs) != 3 || revs[2].Revision != 3 || strings.Join(who, ",") != "ana,ana,bo" {
		t.Fatalf("revisions %+v", revs)
	}
	if _, err := b.PlanRollback(ctx, shop, 9, true, 0); err == nil || !strings.Contains(err.Error(), "revision 9 of shop-production: no such revision (there are 1 to 3)") {
		t.Fatalf("rollback to a revision there is not: %v", err)
	}
	if fc.DeployRecordCount() != 3 {
		t.Fatalf("%d deploy records in the Cluster, want 3", fc.DeployRecordCount())
	}
}
