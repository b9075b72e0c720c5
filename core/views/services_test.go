package views

import (
	"testing"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
)

func TestServiceRowBelowReplicas(t *testing.T) {
	r := ServiceRow{Desired: "2", Ready: 1, NotReadyOn: []string{"m2", "m1", "m2"}}
	r.Judge()
	if !r.Below || r.Note() != "below replicas; not ready on m1, m2" {
		t.Fatalf("one of two ready: below=%t note=%q", r.Below, r.Note())
	}
	for _, ok := range []ServiceRow{{Desired: "2", Ready: 2}, {Desired: "global", Ready: 0}, {Desired: "-", Ready: 0}} {
		ok.Judge()
		if ok.Below || ok.Note() != "" {
			t.Errorf("%+v reported below its replicas", ok)
		}
	}
}

func TestServicesJoinsDeclaredAndObserved(t *testing.T) {
	snap := deploy.Snapshot{Machines: []deploy.MachineState{
		{ID: "id1", Name: "m1", Containers: []rpc.ContainerObservation{
			{MachineID: "id1", Namespace: "app-prod", Service: "web", State: "running", Ready: true, RestartCount: 1},
			{MachineID: "id1", Namespace: "app-prod", Service: "web", State: "running", Labels: map[string]string{rpc.LabelKind: "hook"}},
		}},
		{ID: "id2", Name: "m2", Containers: []rpc.ContainerObservation{
			{MachineID: "id2", Namespace: "app-prod", Service: "web", State: "exited"},
			{MachineID: "id2", Namespace: "other-prod", Service: "stray", State: "running", Ready: true},
		}},
	}}
	decl := map[string]map[string]deploy.Service{"app-prod": {
		"web": {Name: "web", Replicas: 3},
		"db":  {Name: "db", Mode: deploy.ModeGlobal},
	}}
	got := Services(snap, decl, map[string]bool{}, "")
	if len(got) != 3 {
		t.Fatalf("rows %+v, want db, web, stray", got)
	}
	db, web, stray := got[0], got[1], got[2]
	if db.Service != "db" || db.Desired != "global" || db.Total != 0 {
		t.Errorf("db row %+v", db)
	}
	if web.Desired != "3" || web.Total != 2 || web.Running != 1 || web.Ready != 1 || web.Restarts != 1 || !web.Below ||
		len(web.NotReadyOn) != 1 || web.NotReadyOn[0] != "m2" {
		t.Errorf("web row %+v (the hook must not count)", web)
	}
	if stray.Desired != "-" || stray.Namespace != "other-prod" {
		t.Errorf("undeclared row %+v", stray)
	}
	only := Services(snap, decl, map[string]bool{"app-prod": true}, "app-prod")
	if len(only) != 2 || only[1].Desired != "removing" {
		t.Errorf("namespace filter with a removal: %+v", only)
	}
	if MachineName(snap, "id9") != "id9" || MachineName(snap, "id2") != "m2" {
		t.Error("MachineName")
	}
}

// TestServicesNamesDownMachines: Containers the Serving Pointer names on
// a Down Machine (unobserved) are named in the row; with none ready
// elsewhere the note says every serving replica is Down.
func TestServicesNamesDownMachines(t *testing.T) {
	snap := deploy.Snapshot{Machines: []deploy.MachineState{
		{ID: "id1", Name: "m1", Observed: true, Containers: []rpc.ContainerObservation{
			{MachineID: "id1", Namespace: "app-prod", Service: "web", State: "running", Ready: true},
		}},
		{ID: "id2", Name: "m2", Membership: deploy.MembershipDown},
	}, Serving: map[string][]rpc.ServingContainer{
		"app-prod/web": {{ID: "c1", MachineID: "id1"}, {ID: "c2", MachineID: "id2"}},
		"app-prod/api": {{ID: "c3", MachineID: "id2"}},
	}}
	decl := map[string]map[string]deploy.Service{"app-prod": {"web": {Name: "web", Replicas: 2}, "api": {Name: "api", Replicas: 1}}}
	got := Services(snap, decl, nil, "")
	api, web := got[0], got[1]
	if len(web.DownOn) != 1 || web.DownOn[0] != "m2" || web.Note() != "below replicas; replicas on Down m2" {
		t.Errorf("web: %+v, note %q", web, web.Note())
	}
	if len(api.DownOn) != 1 || api.Note() != "every serving replica is on a Down Machine (m2)" {
		t.Errorf("api: %+v, note %q", api, api.Note())
	}
}

// TestServicesJob: a scheduled job is declared "job", never below its
// replicas.
func TestServicesJob(t *testing.T) {
	decl := map[string]map[string]deploy.Service{"app-prod": {"report": {Name: "report", Replicas: 1, Schedule: &jobs.Schedule{Cron: "@daily"}}}}
	got := Services(deploy.Snapshot{}, decl, map[string]bool{}, "")
	if len(got) != 1 || got[0].Desired != "job" || got[0].Below || got[0].Note() != "" {
		t.Fatalf("rows %+v", got)
	}
}
