package client

import (
	"context"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/fakecluster"
)

const shopWithJob = shopCompose + `  report:
    image: app:1
    command: ["/report"]
    x-schedule: {cron: "0 3 * * *", timezone: Europe/Paris}
`

// TestDeployStoresJobs: a deploy stores its scheduled job (the run spec
// of kind run, no Container started for it), a deploy that no longer
// declares it deletes it, and project rm deletes the namespace's jobs.
func TestDeployStoresJobs(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	ctx := context.Background()
	if _, err := s.Deploy(ctx, DeployRequest{Compose: []byte(shopWithJob), File: "compose.yaml"}, Hooks{}); err != nil {
		t.Fatal(err)
	}
	fc.Lock()
	j, ok := fc.Jobs["shop-production/report"]
	fc.Unlock()
	running := len(fc.Running())
	if !ok || j.Schedule.Timezone != "Europe/Paris" || j.Spec.Kind != rpc.KindRun || j.Spec.Restart != "no" || j.Spec.Command[0] != "/report" || j.Deployment == "" {
		t.Fatalf("stored job = %+v (ok %v)", j, ok)
	}
	if running != 2 {
		t.Fatalf("%d Containers running, want web's 2 (a job has none)", running)
	}
	jobs, err := s.Jobs(ctx, JobsRequest{Namespace: "shop-production"})
	if err != nil || len(jobs) != 1 || jobs[0].Schedule != "0 3 * * *" {
		t.Fatalf("jobs = %+v, %v", jobs, err)
	}
	deployShop(t, s)
	fc.Lock()
	_, ok = fc.Jobs["shop-production/report"]
	fc.Unlock()
	if ok {
		t.Fatal("a deploy that no longer declares the job kept it")
	}
	if _, err := s.Deploy(ctx, DeployRequest{Compose: []byte(shopWithJob), File: "compose.yaml"}, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveProject(ctx, "shop", "production", Hooks{}); err != nil {
		t.Fatal(err)
	}
	fc.Lock()
	n := len(fc.Jobs)
	fc.Unlock()
	if n != 0 {
		t.Fatalf("project rm left %d jobs", n)
	}
}

// TestDeployJobsOlderEntry: an entry without put_jobs deploys a compose
// file without jobs as before, and refuses one with a job asking for an
// upgrade.
func TestDeployJobsOlderEntry(t *testing.T) {
	fc := fakecluster.NewWith(t, fakecluster.Options{Unsupported: []string{rpc.CmdPutJobs, rpc.CmdListJobs}}, "m1", "m2")
	s := New(fc.Store, fc.Entry, "lab")
	deployShop(t, s)
	_, err := s.Deploy(context.Background(), DeployRequest{Compose: []byte(shopWithJob), File: "compose.yaml"}, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "does not serve put_jobs") {
		t.Fatalf("deploy of a job through an older entry: %v", err)
	}
}
