package dashsource

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/dashboard"
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/internal/fakecluster"
)

// newSource is a Source over a fake Cluster with shop deployed.
func newSource(t *testing.T) (*fakecluster.Cluster, *Source) {
	fc := fakecluster.New(t, "m1", "m2")
	s := client.New(fc.Store, fc.Entry, "lab")
	compose := "name: shop\nservices:\n  web:\n    image: app:1\n    deploy: {replicas: 2}\n"
	if _, err := s.Deploy(context.Background(), client.DeployRequest{Compose: []byte(compose), File: "compose.yaml"}, client.Hooks{}); err != nil {
		t.Fatal(err)
	}
	opened := 0
	src := New(func(context.Context) (*client.Session, error) { opened++; return s, nil })
	t.Cleanup(func() {
		if opened > 1 {
			t.Errorf("the Session was opened %d times, want once", opened)
		}
	})
	return fc, src
}

// TestSourceReadsAndScales: the Services page reads the deployed Service
// as scalable; Scale deploys through the library with no prompt and
// writes the plan, the steps and the outcome into the action's output.
func TestSourceReadsAndScales(t *testing.T) {
	fc, src := newSource(t)
	ctx := context.Background()
	svcs, err := src.Services(ctx)
	if err != nil || len(svcs.Services) != 1 {
		t.Fatalf("services %+v, %v", svcs, err)
	}
	if r := svcs.Services[0]; r.Service != "web" || !r.Scalable || r.Execution != "ready" || r.Ingress != "not configured" {
		t.Fatalf("row %+v", r)
	}
	var out strings.Builder
	if err := src.Scale(ctx, "shop-production", "web", 3, &out); err != nil {
		t.Fatalf("scale: %v\n%s", err, out.String())
	}
	for _, want := range []string{"scale web to 3 (from revision 1)", "plan for shop-production", "  ok  ", "outcome of shop-production revision 2: completed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if got := len(fc.Running()); got != 3 {
		t.Fatalf("%d running after scale to 3", got)
	}
	svc, err := src.Service(ctx, "shop-production", "web")
	if err != nil || svc.Desired != 3 || svc.Ready != 3 || len(svc.Containers) != 3 || svc.Serving == nil {
		t.Fatalf("service %+v, %v", svc, err)
	}
	deps, err := src.Deploys(ctx)
	if err != nil || len(deps.Records) != 2 || len(deps.Revisions) != 2 || len(deps.Running) != 2 {
		t.Fatalf("deploys %+v, %v", deps, err)
	}
	for _, r := range deps.Revisions {
		if r.Latest != (r.Revision == 2) {
			t.Errorf("revision %d latest %t", r.Revision, r.Latest)
		}
	}
	if err := src.Scale(ctx, "other-production", "web", 1, &out); err == nil || !strings.Contains(err.Error(), "no Saved State") {
		t.Fatalf("scale of an unsaved namespace: %v", err)
	}
}

// TestSourceStartStop: Stop stops every Container without a revision and
// writes the plan and outcome; a partial one is a *client.PartialError.
func TestSourceStartStop(t *testing.T) {
	fc, src := newSource(t)
	var out strings.Builder
	if err := src.StartStop(context.Background(), "shop-production", "web", "stop", &out); err != nil {
		t.Fatalf("stop: %v\n%s", err, out.String())
	}
	if got := fc.Running(); len(got) != 0 || !strings.Contains(out.String(), "outcome in shop-production: completed") {
		t.Fatalf("running %v after stop; output:\n%s", got, out.String())
	}
	var pe *client.PartialError
	if err := src.StartStop(context.Background(), "shop-production", "web", "restart", &out); err == nil || errors.As(err, &pe) {
		t.Fatalf("verb restart: %v", err)
	}
}

// TestLogLine: a followed line keeps its Machine, Container and time; a
// Machine's stream news becomes the page's down, up or error line.
func TestLogLine(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 5e6, time.UTC)
	rec := rpc.LogRecord{Time: at.UnixNano(), ContainerName: "app-prod-web-1", Text: "GET / | 200"}
	got := logLine(client.LogEvent{Machine: "m2", Line: &observe.Line{Machine: "m2", LogRecord: rec}})
	if want := (dashboard.LogLine{Machine: "m2", Container: "app-prod-web-1", Time: "10:00:00.005", Text: "GET / | 200"}); got != want {
		t.Fatalf("line %+v, want %+v", got, want)
	}
	down := logLine(client.LogEvent{Machine: "m1", Err: errors.New("log stream ended"), Down: true, Retry: 2 * time.Second})
	if down.Stream != "down" || down.RetrySeconds != 2 || down.Error != "log stream ended" {
		t.Fatalf("down %+v", down)
	}
	if up := logLine(client.LogEvent{Machine: "m1", Up: true}); up.Stream != "up" || up.Machine != "m1" {
		t.Fatalf("up %+v", up)
	}
	if failed := logLine(client.LogEvent{Machine: "m1", Err: errors.New("unreachable")}); failed.Error != "machine m1: unreachable" {
		t.Fatalf("failed %+v", failed)
	}
}

// TestSourceJobs: the Jobs page is list_jobs through the entry, every
// namespace, with a failed newest run marking its job failing.
func TestSourceJobs(t *testing.T) {
	fc, src := newSource(t)
	three := 3
	fc.Lock()
	fc.Jobs["shop-production/report"] = rpc.JobDecl{Service: "report", Schedule: jobs.Schedule{Cron: "*/5 * * * *", Concurrency: "forbid"},
		Spec: rpc.ContainerSpec{Image: "shop/report:1", Kind: rpc.KindRun}}
	fc.JobRuns["shop-production/report"] = []store.JobRunBody{{Job: "shop-production/report", Tick: 1772366700000, Status: store.JobRunFailed,
		MachineName: "m2", Container: "shop-production-report-job-ab12", ExitCode: &three, DurationMS: 5000}}
	fc.Unlock()
	got, err := src.Jobs(context.Background())
	if err != nil || len(got.Jobs) != 1 {
		t.Fatalf("jobs %+v, %v", got, err)
	}
	j := got.Jobs[0]
	if j.Namespace != "shop-production" || j.Cron != "*/5 * * * *" || !j.Failing || len(j.Runs) != 1 || !j.Runs[0].Failed || *j.Runs[0].ExitCode != 3 {
		t.Fatalf("job %+v", j)
	}
}

// TestSourceVolumeProtection: the Volumes page reads each volume's
// protection with the library call `ployz volume inspect` makes: the
// Writer's automatic snapshots, its Mirror's lag and the failed
// scheduled run from the Cluster's runs (the fake Cluster's table, with
// the entry's rules), and the Mirror interval from the Saved State's
// x-volume. A Mirror's copy without automatic snapshots has none.
func TestSourceVolumeProtection(t *testing.T) {
	now := time.Now()
	auto := rpc.VolumeSnapshot{Name: "auto-20261207-0500", Created: now.Add(-30 * time.Minute).UnixNano(), GUID: "g1"}
	// No ZFS here: list_volumes is the only fake, each Machine's answer as
	// volume-zfs gives it.
	lists := map[string]rpc.VolumeList{
		"m1": {Pool: "tank", Volumes: []rpc.Volume{{Name: "db", Snapshots: []rpc.VolumeSnapshot{auto, {Name: "before-upgrade", Created: now.UnixNano()}},
			Copy: &rpc.VolumeCopy{Role: volumecopy.Writer}}, {Name: "scratch", Snapshots: []rpc.VolumeSnapshot{}, Copy: &rpc.VolumeCopy{Role: volumecopy.Writer}}}},
		"m2": {Pool: "tank", Volumes: []rpc.Volume{{Name: "db", Snapshots: []rpc.VolumeSnapshot{}, Copy: &rpc.VolumeCopy{Role: volumecopy.Mirror}}}},
	}
	fc := fakecluster.NewWith(t, fakecluster.Options{Routes: func(fc *fakecluster.Cluster, srv *rpc.Server, m *fakecluster.Machine) {
		fakecluster.HandleMethod(fc, srv, m, rpc.ListVolumes, func(rpc.None) (rpc.VolumeList, error) {
			l := lists[m.Name()]
			l.MachineID = m.ID()
			return l, nil
		})
	}}, "m1", "m2")
	s := client.New(fc.Store, fc.Entry, "lab")
	compose := "name: shop\nservices:\n  web:\n    image: app:1\nvolumes:\n  db:\n    name: db\n    driver: ployz-zfs\n" +
		"    x-volume:\n      snapshots: {hourly: 24}\n      mirror: {machine: m2, every: 15m}\n"
	ctx := context.Background()
	if _, err := s.Deploy(ctx, client.DeployRequest{Compose: []byte(compose), File: "compose.yaml"}, client.Hooks{}); err != nil {
		t.Fatal(err)
	}
	// An operator's sync landed on m2 40 minutes ago; the schedule's
	// next one failed.
	put := func(gen uint64, op, state, errText string, started time.Time, outcome string) {
		run, err := json.Marshal(operator.VolumeRun{Volume: "db", Gen: gen, Kind: "sync", State: state, Error: errText, Started: started,
			Steps: []operator.RunStep{{Name: "send", Machine: "m2", Outcome: outcome}}})
		if err != nil {
			t.Fatal(err)
		}
		req := rpc.PutVolumeRunRequest{Volume: "db", Gen: gen, Kind: "sync", State: state, Error: errText, StartedAt: started.UnixMilli(),
			UpdatedAt: started.UnixMilli(), Operator: store.HistoryOperator{Name: op}, Import: true, Run: run}
		if _, err := rpc.Invoke(ctx, fc.Entry, rpc.Target{}, rpc.PutVolumeRun, req); err != nil {
			t.Fatal(err)
		}
	}
	put(1, "alice", operator.RunDone, "", now.Add(-40*time.Minute), operator.RunDone)
	put(2, volprotect.ScheduleOperator("m1"), operator.RunFailed, "send db from m1 to m2: connection reset", now.Add(-5*time.Minute), operator.RunFailed)

	src := New(func(context.Context) (*client.Session, error) { return s, nil })
	v, err := src.Volumes(ctx)
	if err != nil || len(v.Machines) != 2 {
		t.Fatalf("volumes %+v, %v", v, err)
	}
	p, ok := v.Machines[0].Protection["db"]
	if !ok {
		t.Fatalf("m1 protection %+v", v.Machines[0].Protection)
	}
	if p.SnapshotsKept != 1 || p.MirrorEvery != "15m" || p.Error != "" {
		t.Errorf("db on m1 %+v", p)
	}
	if len(p.Mirrors) != 1 || p.Mirrors[0].Machine != "m2" || p.Mirrors[0].Gen != 1 || p.Mirrors[0].BehindSeconds < 40*60 || p.Mirrors[0].BehindSeconds > 41*60 {
		t.Errorf("db's Mirrors %+v", p.Mirrors)
	}
	if p.Scheduled == nil || p.Scheduled.Gen != 2 || p.Scheduled.State != operator.RunFailed || !strings.Contains(p.Scheduled.Error, "connection reset") {
		t.Errorf("db's scheduled run %+v", p.Scheduled)
	}
	if _, ok := v.Machines[0].Protection["scratch"]; ok {
		t.Errorf("a Writer without x-volume, runs or automatic snapshots has protection: %+v", v.Machines[0].Protection)
	}
	if len(v.Machines[1].Protection) != 0 {
		t.Errorf("m2's Mirror copy has protection: %+v", v.Machines[1].Protection)
	}
}
