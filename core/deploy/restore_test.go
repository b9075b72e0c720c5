package deploy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// downSnap is m1, m2 and m3 each running one up-to-date web replica, with
// m2 Down (unobserved, membership down): the pointer names all three.
func downSnap(web Service) Snapshot {
	s := snapOf(machine("m1", nil, ctr("web", hashOf(web), "running")), machine("m2", nil), machine("m3", nil, ctr("web", hashOf(web), "running")))
	s.Machines[1].Observed, s.Machines[1].Membership = false, MembershipDown
	s.Missing = []Unobserved{{MachineID: "id-m2", Name: "m2", Reason: "unavailable"}}
	s.Serving = map[string][]rpc.ServingContainer{ns + "/web": {
		{ID: "m1-c0", MachineID: "id-m1"}, {ID: "m2-web-old", MachineID: "id-m2"}, {ID: "m3-c0", MachineID: "id-m3"}}}
	return s
}

// A replica on a Down Machine is replaced on one that answers and its
// Container gets a retire row (no call, out of the pointer); the Down
// Machine gets nothing else.
func TestPlanReplacesReplicasOnDownMachines(t *testing.T) {
	web := svc("web", 3)
	p, err := MakePlan(app(web), downSnap(web), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := summary(p)
	if got != lines("m1 web unchanged", "m3 web unchanged", "m1 web create", "m2 web retire") {
		t.Fatalf("rows:\n%s", got)
	}
	for _, r := range p.Rows {
		switch r.Op {
		case OpCreate:
			if !strings.Contains(r.Reason, "replaces m2-web-old on Down m2") {
				t.Errorf("create reason %q does not name what it replaces", r.Reason)
			}
		case OpRetire:
			if r.OldID != "m2-web-old" || r.Spec != nil || len(actions(r)) != 0 {
				t.Errorf("retire row %+v acts on its Machine", r)
			}
		}
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "m2 Down: its Containers are left alone") {
		t.Errorf("warnings %q do not say what happens to m2", p.Warnings)
	}
	if len(p.Unplaced()) != 0 {
		t.Errorf("unplaced %v", p.Unplaced())
	}
}

// max_per_machine 1 on three Machines, one Down: nowhere to put the
// replacement, so the lost replica stays in the pointer (it serves again
// if its Machine returns) and the plan says it is held.
func TestPlanKeepsLostReplicaWithoutReplacement(t *testing.T) {
	web := svc("web", 3, func(s *Service) { s.MaxPerMachine = 1 })
	p, err := MakePlan(app(web), downSnap(web), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != lines("m1 web unchanged", "m3 web unchanged") {
		t.Fatalf("rows:\n%s", got)
	}
	if len(p.Unplaced()) != 1 {
		t.Fatalf("unplaced %v", p.Unplaced())
	}
}

// A scale-down (or replicas the Machines that answer already cover)
// retires the Down Machine's replica without a replacement; replicas: 0
// retires it too.
func TestPlanRetiresSurplusOnDownMachines(t *testing.T) {
	for _, n := range []int{2, 0} {
		web := svc("web", n)
		p, err := MakePlan(app(web), downSnap(svc("web", 3)), PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(summary(p), "m2 web retire") || strings.Contains(summary(p), "create") {
			t.Fatalf("replicas %d rows:\n%s", n, summary(p))
		}
	}
}

// A Machine that only did not answer (suspect, partitioned) is not Down:
// nothing of it is retired.
func TestPlanRetiresNothingOnUnobservedMachineNotDown(t *testing.T) {
	web := svc("web", 3)
	s := downSnap(web)
	s.Machines[1].Membership = "suspect"
	p, err := MakePlan(app(web), s, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(summary(p), "retire") {
		t.Fatalf("rows:\n%s", summary(p))
	}
}

// A Service held because its Provisioned Volume's Writer is unobserved
// names the Down Machine and the volume restore command, with the Mirror
// an observed Machine holds.
func TestPlanNamesVolumeRestoreForWriterOnDownMachine(t *testing.T) {
	db := svc("db", 1, func(s *Service) { s.Provisioned = []string{"hello-data"} })
	s := downSnap(svc("web", 3))
	s.Machines[2].Held = []string{"hello-data"}
	p, err := MakePlan(app(db), s, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := strings.Join(p.Unplaced(), "\n")
	if !strings.Contains(u, "Down m2") || !strings.Contains(u, "`ployz volume restore hello-data --from m3 --force`") {
		t.Fatalf("unplaced %q", u)
	}
}

// The executor takes a retired Container out of the pointer only once the
// replacement is ready, and never calls its Machine.
func TestExecuteRetireLeavesDownMachineAlone(t *testing.T) {
	web := svc("web", 3)
	p, err := MakePlan(app(web), downSnap(web), PlanOptions{DeploymentID: "d1"})
	if err != nil {
		t.Fatal(err)
	}
	var create string
	for _, r := range p.Rows {
		if r.Op == OpCreate {
			create = r.NewName
		}
	}
	for _, failCreate := range []bool{false, true} {
		rec := &recorder{pointers: map[string]*pointer{ns + "/web": {id: "p0", set: downSnap(web).Serving[ns+"/web"]}}}
		if failCreate {
			rec.fail = map[string]error{rpc.CmdCreateContainer + " " + create: errors.New("no space left")}
		}
		o := (&Executor{C: rec}).Run(context.Background(), p)
		for _, call := range rec.calls {
			if strings.HasPrefix(call, "id-m2 ") {
				t.Fatalf("a call reached the Down Machine: %s", call)
			}
		}
		var named []string
		for _, c := range rec.pointer(ns + "/web").set {
			named = append(named, c.ID)
		}
		if failCreate != slices.Contains(named, "m2-web-old") || !failCreate && len(named) != 3 {
			t.Fatalf("failCreate %v: pointer names %v; outcome %s\n%s", failCreate, named, o.Status, steps(o))
		}
	}
}
