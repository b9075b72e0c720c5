package client

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// TestDeployRecordWrittenLive runs a deployRecord the way execute does:
// another reader of the store sees the Deploy running with its step in
// flight before it ends, then each Machine's outcome.
func TestDeployRecordWrittenLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "operator.db")
	st, err := operator.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reader, err := operator.Open(path) // the dashboard's own connection
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	p := deploy.Plan{DeploymentID: "d1", Namespace: "app-prod", Project: "app", Environment: "prod", Revision: 3,
		Rows: []deploy.Row{{MachineID: "a", Machine: "m1", Op: deploy.OpCreate}, {MachineID: "b", Machine: "m2", Op: deploy.OpCreate}}}
	var warns []error
	rec := recordDeploy(st, "lab", p, "scale web to 2", func(err error) { warns = append(warns, err) }, nil)
	s := deploy.Step{MachineID: "a", Machine: "m1", Service: "web", Action: rpc.CmdWaitReady, Container: "web-1"}
	rec.rec.Event(deploy.Event{Step: s})
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs, _, err := DeployRecords(reader, "lab", 10)
		if err == nil && len(recs) == 1 && len(recs[0].Machines) == 2 && strings.Join(recs[0].Machines[0].InFlight, "") == "web wait_ready web-1" {
			if recs[0].Status != deploy.RecordRunning || recs[0].Why != "scale web to 2" || recs[0].Machines[1].Status != deploy.MachinePending {
				t.Fatalf("running record %+v", recs[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step in flight never reached the store: %+v, %v", recs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Status = deploy.StepFailed
	rec.finish(deploy.Outcome{DeploymentID: "d1", Status: "partial", Steps: []deploy.Step{s}})
	recs, _, err := DeployRecords(reader, "lab", 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("%+v, %v", recs, err)
	}
	if r := recs[0]; r.Status != "partial" || r.Machines[0].Status != deploy.StepFailed || r.Machines[1].Status != deploy.StepNeverAttempted || r.FinishedAt.IsZero() {
		t.Fatalf("finished record %+v", r)
	}
	if len(warns) > 0 {
		t.Fatalf("warnings: %v", warns)
	}
}
