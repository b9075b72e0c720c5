package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// TestHistoryRecordsEveryOperation: a deploy, scale, restart, rollback,
// removed service, drain, failed deploy and project removal each leave
// one entry in the Cluster's history, naming the operator, the kind, the
// revision and how it ended; History filters them by kind and namespace.
func TestHistoryRecordsEveryOperation(t *testing.T) {
	t.Setenv(operator.EnvOperator, "ana@laptop")
	fc, s := newFake(t, "m1", "m2")
	ctx := context.Background()
	shop := Project{Name: "shop", Environment: deploy.DefaultEnvironment}
	deployShop(t, s)
	apply := func(dp *DeployPlan, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ApplyDeploy(ctx, dp, Hooks{}); err != nil {
			t.Fatal(err)
		}
	}
	apply(s.PlanScale(ctx, shop, "web", 3))
	apply(s.PlanRestart(ctx, shop, "web"))
	apply(s.PlanRollback(ctx, shop, 1, false, 0))
	if _, err := s.Drain(ctx, Drain{Machine: "m2"}); err != nil {
		t.Fatal(err)
	}
	fc.Machine("m1").FailCreate = true
	apply(s.PlanScale(ctx, shop, "web", 2)) // as the rollback left it: unchanged
	if _, err := s.Deploy(ctx, DeployRequest{Compose: []byte(shopCompose + "  api:\n    image: app:1\n"), File: "compose.yaml"}, Hooks{}); err == nil {
		t.Fatal("a deploy creating on a failing Machine succeeded")
	}
	fc.Machine("m1").FailCreate = false
	if _, err := s.RemoveProject(ctx, "shop", "production", Hooks{}); err != nil {
		t.Fatal(err)
	}

	all, err := s.History(ctx, HistoryFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range all {
		if e.Operator.Name != "ana@laptop" || e.StartedAt == 0 || e.FinishedAt < e.StartedAt || e.RecordedBy != "id-m1" {
			t.Errorf("entry %+v: operator, times or recorder missing", e)
		}
		got = append(got, e.Kind+":"+e.Outcome)
	}
	slices.Sort(got)
	want := []string{"deploy:completed", "deploy:partial", "drain:completed", "drain:completed", "remove:completed",
		"restart:completed", "rollback:completed", "scale:completed", "scale:unchanged"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("history\n %v\nwant\n %v", got, want)
	}
	rb, err := s.History(ctx, HistoryFilter{Kind: rpc.HistoryRollback})
	if err != nil || len(rb) != 1 || rb[0].Revision != 4 || rb[0].Namespace != "shop-production" ||
		!strings.HasPrefix(rb[0].Detail, "rollback to revision 1") || !slices.Equal(rb[0].Services, []string{"web"}) {
		t.Fatalf("rollback entries %+v, %v", rb, err)
	}
	failed, _ := s.History(ctx, HistoryFilter{Kind: rpc.HistoryDeploy, Namespace: "shop-production", Limit: 1})
	if len(failed) != 1 || failed[0].Outcome != rpc.OutcomePartial || !strings.Contains(failed[0].Detail, "is partial") {
		t.Fatalf("newest deploy %+v: want the partial one with its error", failed)
	}
}

// TestHistoryRefusesUnknownKind: the filter is checked before the entry
// is asked, naming the field.
func TestHistoryRefusesUnknownKind(t *testing.T) {
	_, s := newFake(t, "m1")
	_, err := s.History(context.Background(), HistoryFilter{Kind: "deploys"})
	var e *rpc.Error
	if !errors.As(err, &e) || e.Details["field"] != "kind" {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestKindOf(t *testing.T) {
	for why, want := range map[string]string{"": "deploy", "scale web to 3 (from revision 2)": "scale", "restart web (from revision 1)": "restart",
		"remove service db (from revision 3)": "remove-service", "rollback to revision 2": "rollback", "drain m2": "drain",
		"undrain m2": "undrain", "global catch-up for m3": "catch-up", "something else": "deploy"} {
		if got := kindOf(why); got != want {
			t.Errorf("kindOf(%q) = %s, want %s", why, got, want)
		}
	}
}
