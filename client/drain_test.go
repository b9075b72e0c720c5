package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// TestDrainMovesContainers: a drain labels the Machine, confirms and
// redeploys each saved namespace, and returns a typed report: the web
// Containers left m2 for m1, nothing remains; undrain clears the label.
func TestDrainMovesContainers(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	ctx := context.Background()
	var marked string
	var confirmed []string
	var done []NamespaceResult
	rep, err := s.Drain(ctx, Drain{Machine: "m2", Marked: func(in rpc.Inspection) { marked = in.Name },
		Confirm: func(dp *DeployPlan) error { confirmed = append(confirmed, dp.Why); return nil },
		Done:    func(r NamespaceResult) { done = append(done, r) }})
	if err != nil {
		t.Fatalf("drain: %v (report %+v)", err, rep)
	}
	if marked != "m2" || strings.Join(confirmed, ";") != "drain m2" || len(done) != 1 {
		t.Fatalf("marked %q, confirmed %v, done %+v", marked, confirmed, done)
	}
	if !drained(fc) {
		t.Fatal("m2 is not labelled drained")
	}
	if rep.Machine != "m2" || len(rep.Namespaces) != 1 || rep.Namespaces[0].Namespace != "shop-production" ||
		rep.Namespaces[0].Result == nil || rep.Namespaces[0].Result.Outcome == nil || len(rep.Remaining) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if got := strings.Join(fc.Running(), ","); got != "m1:web,m1:web" {
		t.Fatalf("running %s after the drain, want both web on m1", got)
	}
	if _, err := s.Drain(ctx, Drain{Machine: "m2", Undrain: true}); err != nil {
		t.Fatal(err)
	}
	if drained(fc) {
		t.Fatal("undrain left the label")
	}
}

// TestDrainDeclinedIsPartial: a namespace whose plan the caller declines
// is reported with the reason, its Container on the drained Machine is
// named as remaining, and the drain is partial.
func TestDrainDeclinedIsPartial(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	rep, err := s.Drain(context.Background(), Drain{Machine: "m2", Confirm: func(*DeployPlan) error { return errors.New("not confirmed; nothing changed") }})
	var pe *PartialError
	if !errors.As(err, &pe) || err.Error() != "m2: 1 of 1 namespace(s) failed to redeploy; 1 Container(s) could not move" {
		t.Fatalf("error %v, want partial", err)
	}
	if len(rep.Namespaces) != 1 || rep.Namespaces[0].Error != "not confirmed; nothing changed" || rep.Namespaces[0].Result != nil ||
		len(rep.Remaining) != 1 || rep.Remaining[0].Service != "web" || rep.Remaining[0].Reason != "no other eligible Machine" {
		t.Fatalf("report %+v", rep)
	}
	if got := strings.Join(fc.Running(), ","); got != "m1:web,m2:web" {
		t.Fatalf("a declined drain moved Containers: %s", got)
	}
}

// TestGlobalCatchUpOnlyGlobal: the catch-up redeploys only namespaces
// declaring a Global Service.
func TestGlobalCatchUpOnlyGlobal(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	agents := "name: agents\nservices:\n  agent:\n    image: app:1\n    deploy: {mode: global}\n"
	if _, err := s.Deploy(context.Background(), DeployRequest{Compose: []byte(agents), File: "compose.yaml"}, Hooks{}); err != nil {
		t.Fatal(err)
	}
	var planned []string
	err := s.GlobalCatchUp(context.Background(), "m2", Reconcile{Confirm: func(dp *DeployPlan) error {
		planned = append(planned, dp.Plan.Namespace)
		return nil
	}})
	if err != nil || strings.Join(planned, ",") != "agents-production" {
		t.Fatalf("catch-up planned %v, %v; want only agents-production", planned, err)
	}
	if got := strings.Join(fc.Running(), ","); got != "m1:agent,m1:web,m2:agent,m2:web" {
		t.Fatalf("running %s", got)
	}
}
