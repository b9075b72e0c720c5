package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// testHost is Machine m1 over a real store, with no Docker: what the
// job commands need.
type testHost struct{ featuretest.StoreHost }

func (h testHost) Machine() machine.Record {
	return machine.Record{ID: h.Self, Name: h.Self, Phase: machine.Participating}
}
func (testHost) WatchStore(context.Context, ...string) *sdkstore.Watch { return nil }
func (testHost) JobRunner() jobs.Runner                                { return nil }
func (testHost) AdmitsJob(context.Context, store.JobBody) bool         { return false }
func (testHost) Settle(context.Context, *sdkstore.Client)              {}

var _ Host = testHost{}

func jobDecl(service, cron string) rpc.JobDecl {
	return rpc.JobDecl{Service: service, Schedule: jobs.Schedule{Cron: cron, Concurrency: jobs.ConcurrencyForbid}, Deployment: "d1",
		Spec: rpc.ContainerSpec{Namespace: "shop-prod", Service: service, Kind: rpc.KindRun, Image: "shop/report:1"}}
}

// TestPutAndListJobs: put_jobs stores a namespace's jobs (pruning the
// ones no longer declared, keeping a job's since), list_jobs answers
// them with their next tick and newest runs first.
func TestPutAndListJobs(t *testing.T) {
	h, st := featuretest.Store(t, "m1")
	f := New(testHost{h}, hclog.NewNullLogger())
	ctx := context.Background()
	if _, err := featuretest.Call(t, featuretest.Typed(f.putJobs), rpc.PutJobsRequest{Namespace: "shop-prod", Jobs: []rpc.JobDecl{jobDecl("report", "@hourly"), jobDecl("cleanup", "@daily")}}); err != nil {
		t.Fatal(err)
	}
	first, _, _ := store.Jobs(st).Get(ctx, "shop-prod/report")
	res, err := featuretest.Call(t, featuretest.Typed(f.putJobs), rpc.PutJobsRequest{Namespace: "shop-prod", Jobs: []rpc.JobDecl{jobDecl("report", "*/5 * * * *")}, Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.(rpc.JobsPut); len(got.Removed) != 1 || got.Removed[0] != "cleanup" {
		t.Fatalf("put = %+v, want cleanup removed", got)
	}
	again, _, _ := store.Jobs(st).Get(ctx, "shop-prod/report")
	if again.Body.Since != first.Body.Since || again.Body.Cron != "*/5 * * * *" {
		t.Fatalf("report after redeploy = %+v (since was %d)", again.Body, first.Body.Since)
	}
	for i, tick := range []int64{1000, 3000, 2000} {
		code := i
		b := store.JobRunBody{Job: "shop-prod/report", Tick: tick, Status: store.JobRunSucceeded, ExitCode: &code}
		if _, err := store.JobRuns(st).Put(ctx, sdkstore.Row[store.JobRunBody]{Key: store.JobRunKey(b.Job, tick), Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC)
	l, err := listJobs(ctx, st, rpc.ListJobsRequest{Namespace: "shop-prod", Runs: 2}, now)
	if err != nil || len(l.Jobs) != 1 {
		t.Fatalf("list = %+v, %v", l, err)
	}
	j := l.Jobs[0]
	if j.Image != "shop/report:1" || j.Next != now.Add(4*time.Minute).UnixMilli() || len(j.Runs) != 2 || j.Runs[0].Tick != 3000 || j.Runs[1].Tick != 2000 {
		t.Fatalf("job = %+v", j)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.putJobs), rpc.PutJobsRequest{Namespace: "shop-prod", Jobs: []rpc.JobDecl{jobDecl("report", "61 * * * *")}}); err == nil {
		t.Fatal("an invalid cron was stored")
	}
}
