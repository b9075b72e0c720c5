package deploy

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// TestRecordFixture pins the stored body of a deploy record: a reader of
// this version reads a body with fields it does not know, and writes
// every field the fixture has under the same name.
func TestRecordFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/record-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	r, err := ParseRecord(b, at("2026-12-02T04:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	want := Record{DeploymentID: "d3f9a1", Namespace: "hello-production", Project: "hello", Environment: "production", Revision: 4,
		Why: "scale web to 3", Status: "partial", StartedAt: at("2026-12-02T03:00:00Z"), UpdatedAt: at("2026-12-02T03:00:41Z"), FinishedAt: at("2026-12-02T03:00:41Z"),
		Machines: []MachineRecord{
			{MachineID: "id-m1", Machine: "m1", Status: "completed", Completed: 4, Last: "web wait_ready web-2: completed"},
			{MachineID: "id-m2", Machine: "m2", Status: "failed", Completed: 1, Failed: 1, NeverAttempted: 2, Last: "web wait_ready web-3: failed",
				Error: "web wait_ready web-3: not ready: exited (exit code 1)"},
			{MachineID: "id-m3", Machine: "m3", Status: "never_attempted", NeverAttempted: 3},
		},
		Images: map[string]string{"web": "hello-web:build-1f2e3d", "api": "ployz-testapp:latest"}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", r, want)
	}
	out, _ := json.Marshal(r)
	var got, fixture map[string]any
	_ = json.Unmarshal(out, &got)
	_ = json.Unmarshal(b, &fixture)
	for k := range fixture {
		if _, ok := got[k]; !ok && !strings.HasPrefix(k, "a_field_from") {
			t.Errorf("written body lacks %q", k)
		}
	}
	for _, k := range []string{"completed", "failed", "never_attempted", "machine_id", "status"} {
		if _, ok := got["machines"].([]any)[2].(map[string]any)[k]; !ok {
			t.Errorf("a Machine's %q is not written when zero", k)
		}
	}
	if _, ok := got["stale"]; ok {
		t.Error("stale is a reader's mark, never written for a finished record")
	}
}

func TestParseRecordMarksStale(t *testing.T) {
	now := time.Now()
	b, _ := json.Marshal(Record{Status: RecordRunning, UpdatedAt: now.Add(-StaleAfter - time.Second)})
	if r, _ := ParseRecord(b, now); !r.Stale {
		t.Fatal("a running record unwritten past StaleAfter is not stale")
	}
	b, _ = json.Marshal(Record{Status: RecordRunning, UpdatedAt: now})
	if r, _ := ParseRecord(b, now); r.Stale {
		t.Fatal("a fresh running record is stale")
	}
	if _, err := ParseRecord([]byte("{"), now); err == nil {
		t.Fatal("a torn body parsed")
	}
}

// TestRecorderFollowsExecution feeds a Recorder what an Executor emits:
// live in-flight steps per Machine, then each Machine's outcome,
// including one no step reached.
func TestRecorderFollowsExecution(t *testing.T) {
	p := Plan{DeploymentID: "d1", Namespace: "app-prod", Project: "app", Environment: "prod", Revision: 2, Rows: []Row{
		{MachineID: "a", Machine: "m1", Service: "web", Op: OpCreate},
		{MachineID: "b", Machine: "m2", Service: "web", Op: OpCreate},
		{MachineID: "c", Machine: "m3", Service: "web", Op: OpCreate},
		{MachineID: "d", Machine: "m4", Service: "web", Op: OpUnchanged},
	}}
	r := NewRecorder(p, "", time.Now())
	rec, changed := r.Take(time.Now())
	if !changed || rec.Status != RecordRunning || len(rec.Machines) != 3 || rec.Machines[0].Status != MachinePending {
		t.Fatalf("start: %+v changed=%v", rec, changed)
	}
	if _, changed := r.Take(time.Now()); changed {
		t.Fatal("changed without an event")
	}
	s1 := Step{Row: 0, MachineID: "a", Machine: "m1", Service: "web", Action: rpc.CmdCreateContainer, Container: "web-1"}
	r.Event(Event{Step: s1})
	r.Event(Event{Step: s1, Pull: &rpc.PullProgress{Bytes: 2e6, Total: 4e6}})
	rec, _ = r.Take(time.Now())
	if m := rec.Machines[0]; m.Status != MachineRunning || len(m.InFlight) != 1 || m.InFlight[0] != "web create_container web-1 (2.0 of 4.0 MB)" {
		t.Fatalf("in flight: %+v", m)
	}
	s1.Status = StepCompleted
	r.Event(Event{Step: s1, Done: true})
	s2 := Step{Row: 1, MachineID: "b", Machine: "m2", Service: "web", Action: rpc.CmdWaitReady, Container: "web-2", Status: StepFailed, Error: "not ready"}
	r.Event(Event{Step: s2})
	r.Event(Event{Step: s2, Done: true})
	rec, _ = r.Take(time.Now())
	if rec.Machines[0].Status != StepCompleted || rec.Machines[1].Status != StepFailed || rec.Machines[1].Error != "web wait_ready web-2: not ready" {
		t.Fatalf("after steps: %+v", rec.Machines)
	}
	r.Finish(Outcome{Status: "partial", Steps: []Step{s1, s2,
		{Row: 1, MachineID: "b", Machine: "m2", Action: rpc.CmdRemoveContainer, Status: StepNeverAttempted}}}, time.Now())
	rec, _ = r.Take(time.Now())
	got := map[string]string{}
	for _, m := range rec.Machines {
		got[m.Machine] = m.Status
	}
	if rec.Status != "partial" || rec.FinishedAt.IsZero() || !reflect.DeepEqual(got, map[string]string{"m1": "completed", "m2": "failed", "m3": "never_attempted"}) {
		t.Fatalf("finished: %s %v", rec.Status, got)
	}
	if rec.Machines[1].NeverAttempted != 1 || rec.Machines[1].Failed != 1 {
		t.Fatalf("m2 counts %+v", rec.Machines[1])
	}
}

func TestLastOutcomesNewestPerMachine(t *testing.T) {
	t0 := time.Now()
	old := Record{Namespace: "a", DeploymentID: "d1", StartedAt: t0, Machines: []MachineRecord{{MachineID: "1", Machine: "m1", Status: "failed"}, {MachineID: "2", Machine: "m2", Status: "completed"}}}
	newer := Record{Namespace: "a", DeploymentID: "d2", StartedAt: t0.Add(time.Minute), Stale: true, Machines: []MachineRecord{{MachineID: "1", Machine: "m1", Status: MachineRunning}}}
	got := LastOutcomes([]Record{old, newer})
	if len(got) != 2 || got[0].DeploymentID != "d2" || got[0].Status != "unknown" || got[1].DeploymentID != "d1" || got[1].Status != "completed" {
		t.Fatalf("%+v", got)
	}
}
