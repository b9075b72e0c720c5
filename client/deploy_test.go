package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/deploy"
)

const shopCompose = `name: shop
services:
  web:
    image: app:1
    deploy: {replicas: 2}
`

// deployShop plans and applies shopCompose, failing the test on error.
func deployShop(t *testing.T, s *Session) DeployResult {
	t.Helper()
	res, err := s.Deploy(context.Background(), DeployRequest{Compose: []byte(shopCompose), File: "compose.yaml"}, Hooks{})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	return res
}

// TestDeployPlanThenApply: PlanDeploy changes nothing on the Machines;
// ApplyDeploy saves revision 1, runs the plan with its steps heard
// through Hooks and records the Deploy; a second Deploy is up to date.
func TestDeployPlanThenApply(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	ctx := context.Background()
	dp, err := s.PlanDeploy(ctx, DeployRequest{Compose: []byte(shopCompose), File: "compose.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if dp.Plan.Namespace != "shop-production" || dp.Plan.Changes() != 2 {
		t.Fatalf("plan %s with %d changes, want shop-production with 2", dp.Plan.Namespace, dp.Plan.Changes())
	}
	if got := fc.Running(); len(got) != 0 {
		t.Fatalf("planning ran Containers: %v", got)
	}
	var steps int
	res, err := s.ApplyDeploy(ctx, dp, Hooks{Step: func(e deploy.Event) {
		if e.Done {
			steps++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome == nil || res.Outcome.Status != "completed" || res.Plan.Revision != 1 || steps == 0 {
		t.Fatalf("result %+v after %d steps", res, steps)
	}
	if got := strings.Join(fc.Running(), ","); got != "m1:web,m2:web" {
		t.Fatalf("running %s, want one web on each Machine", got)
	}
	recs, _, err := s.DeployRecords(10)
	if err != nil || len(recs) != 1 || recs[0].Status != "completed" {
		t.Fatalf("records %+v, %v", recs, err)
	}
	again := deployShop(t, s)
	if again.Outcome != nil || again.Plan.Revision != 2 {
		t.Fatalf("second deploy: outcome %+v revision %d, want up to date at revision 2", again.Outcome, again.Plan.Revision)
	}
}

// TestDeployPartial: a Machine that cannot create a Container makes the
// result partial: the error is a *PartialError and the result says what
// ran.
func TestDeployPartial(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	fc.Machine("m2").FailCreate = true
	res, err := s.Deploy(context.Background(), DeployRequest{Compose: []byte(shopCompose), File: "compose.yaml"}, Hooks{})
	var pe *PartialError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "deploy of shop-production revision 1 is partial") {
		t.Fatalf("error %v, want a partial deploy", err)
	}
	if res.Outcome == nil || res.Outcome.Count(deploy.StepFailed) == 0 {
		t.Fatalf("outcome %+v names no failed step", res.Outcome)
	}
}

// TestScaleAndRestart deploy the latest Saved State edited: scale to 4
// runs two more Containers; restart replaces every one.
func TestScaleAndRestart(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	ctx := context.Background()
	shop := Project{Name: "shop", Environment: deploy.DefaultEnvironment}
	dp, err := s.PlanScale(ctx, shop, "web", 4)
	if err != nil {
		t.Fatal(err)
	}
	if dp.Why != "scale web to 4 (from revision 1)" {
		t.Fatalf("why %q", dp.Why)
	}
	if _, err := s.ApplyDeploy(ctx, dp, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if got := len(fc.Running()); got != 4 {
		t.Fatalf("%d running after scale to 4: %v", got, fc.Running())
	}
	before := fc.ContainerIDs()
	dp, err = s.PlanRestart(ctx, shop, "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyDeploy(ctx, dp, Hooks{}); err != nil {
		t.Fatal(err)
	}
	after := fc.ContainerIDs()
	if len(after) != 4 || slices.ContainsFunc(after, func(id string) bool { return slices.Contains(before, id) }) {
		t.Fatalf("restart kept Containers: before %v, after %v", before, after)
	}
	if _, err := s.PlanScale(ctx, Project{Name: "nope", Environment: "production"}, "web", 1); err == nil {
		t.Fatal("scale of a project never deployed planned")
	}
}

// TestStartStopAndRemoveProject: stop and start change the existing
// Containers without a revision; project removal removes them all and
// records an empty revision.
func TestStartStopAndRemoveProject(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	ctx := context.Background()
	rp, err := s.PlanStartStop(ctx, "shop-production", "web", "stop")
	if err != nil || rp.Plan.Changes() != 2 {
		t.Fatalf("stop plan %+v, %v", rp, err)
	}
	if _, err := s.ApplyRows(ctx, rp, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if got := fc.Running(); len(got) != 0 {
		t.Fatalf("running after stop: %v", got)
	}
	if rp, _ := s.PlanStartStop(ctx, "shop-production", "web", "stop"); rp.Plan.Changes() != 0 {
		t.Fatalf("a second stop plans %d changes", rp.Plan.Changes())
	}
	if _, err := s.PlanStartStop(ctx, "shop-production", "db", "start"); err == nil || !strings.Contains(err.Error(), `service "db": no Container found in shop-production`) {
		t.Fatalf("start of a Service with no Container: %v", err)
	}
	var heard []RemovalReport
	rm, err := s.RemoveProject(ctx, "shop", "production", Hooks{Removal: func(r RemovalReport) { heard = append(heard, r) }})
	if err != nil || len(rm.Removals) != 1 || rm.Removals[0].Status != "done" || rm.Removals[0].Removed != 2 || len(heard) != 1 {
		t.Fatalf("removal %+v (heard %+v), %v", rm, heard, err)
	}
	if ids := fc.ContainerIDs(); len(ids) != 0 {
		t.Fatalf("Containers left: %v", ids)
	}
	if saved, _ := s.LatestSaved(ctx); len(saved) != 0 {
		t.Fatalf("a removed project still has a Saved State: %+v", saved)
	}
}
