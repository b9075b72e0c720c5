package release

import (
	"context"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

func views() []rpc.MachineView {
	caps := []string{rpc.CapInspect, rpc.CapUpgradeMachine}
	return []rpc.MachineView{
		{ID: "c3", Name: "m3", Version: "1.0", Capabilities: caps},
		{ID: "a1", Name: "m1", Version: "1.0", Capabilities: caps},
		{ID: "b2", Name: "m2", Version: "1.0", Capabilities: caps},
	}
}

func TestPlanOrderAndRefusals(t *testing.T) {
	m := &Manifest{Version: "1.1"}
	vs := views()
	vs[2].Version = "1.1"                         // m2 is current
	vs[0].Capabilities = []string{rpc.CapInspect} // m3 is too old for the route
	plan, err := Plan(vs, m, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, a := range plan {
		got = append(got, a.Name+":"+a.Do)
	}
	if strings.Join(got, " ") != "m1:upgrade m2:skip m3:refuse" {
		t.Fatalf("plan %v", got)
	}
	if !strings.Contains(plan[2].Reason, rpc.CapUpgradeMachine) {
		t.Fatalf("refusal does not name the capability: %s", plan[2].Reason)
	}
	if _, err := Plan(vs, m, []string{"m9"}, false); err == nil || !strings.Contains(err.Error(), `"m9"`) {
		t.Fatalf("unknown name: %v", err)
	}
	if _, err := Plan(vs, m, nil, false); err == nil {
		t.Fatal("a plan with no Machine and no --all succeeded")
	}
	plan, _ = Plan(vs, m, []string{"m3", "a1", "m1"}, false)
	if len(plan) != 2 || plan[0].Name != "m1" || plan[1].Name != "m3" {
		t.Fatalf("named plan %+v", plan)
	}
}

func TestRolloutOneAtATimeStopsAfterFailure(t *testing.T) {
	plan, _ := Plan(views(), &Manifest{Version: "1.1"}, nil, true)
	var calls []string
	running := 0
	o := Rollout(context.Background(), plan, func(_ context.Context, a Action) MachineOutcome {
		running++
		defer func() { running-- }()
		if running != 1 {
			t.Errorf("%d upgrades at once", running)
		}
		calls = append(calls, a.Name)
		mo := MachineOutcome{MachineID: a.MachineID, Name: a.Name, From: a.From, To: a.To, Outcome: OutcomeUpgraded}
		if a.Name == "m2" {
			// The Machine's own swap failed at the ingress check and put
			// the previous release back (Replacement Compensation).
			mo.Outcome, mo.FailedStep = OutcomeRolledBack, "ingress"
			mo.Steps = []rpc.UpgradeStep{{Name: "ingress", Release: "1.1", Outcome: "failed"}, {Name: "switch", Release: "1.0", Outcome: "ok", Rollback: true}}
		}
		return mo
	}, nil)
	if strings.Join(calls, ",") != "m1,m2" {
		t.Fatalf("upgraded %v, want m1,m2 and a stop", calls)
	}
	want := []string{OutcomeUpgraded, OutcomeRolledBack, OutcomeNotAttempted}
	for i, mo := range o.Machines {
		if mo.Outcome != want[i] {
			t.Errorf("%s: %s, want %s", mo.Name, mo.Outcome, want[i])
		}
	}
	if !o.Partial() {
		t.Fatal("a rollout with a rolled-back Machine is not partial")
	}
	if !strings.Contains(o.Machines[2].Error, "m2 rolled_back") {
		t.Fatalf("not-attempted reason: %s", o.Machines[2].Error)
	}
	if o.Machines[1].FailedStep != "ingress" || !o.Machines[1].Steps[1].Rollback {
		t.Fatalf("rolled-back Machine outcome %+v", o.Machines[1])
	}
}

func TestRolloutAllUpgradedIsNotPartial(t *testing.T) {
	vs := views()
	vs[0].Version = "1.1"
	plan, _ := Plan(vs, &Manifest{Version: "1.1"}, nil, true)
	o := Rollout(context.Background(), plan, func(_ context.Context, a Action) MachineOutcome {
		return MachineOutcome{Name: a.Name, Outcome: OutcomeUpgraded}
	}, nil)
	if o.Partial() || len(o.Machines) != 3 || o.Machines[2].Outcome != OutcomeCurrent {
		t.Fatalf("outcome %+v", o)
	}
}
