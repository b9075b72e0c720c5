package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

func jobDecl(service, cron string) rpc.JobDecl {
	return rpc.JobDecl{Service: service, Schedule: jobs.Schedule{Cron: cron, Concurrency: jobs.ConcurrencyForbid}, Deployment: "d1",
		Spec: rpc.ContainerSpec{Namespace: "shop-prod", Service: service, Kind: rpc.KindRun, Image: "shop/report:1"}}
}

// put_jobs and list_jobs are tested with the feature (feature/jobs).

// countRunner counts starts; its runs never end.
type countRunner struct{ n atomic.Int32 }

func (c *countRunner) Start(context.Context, store.JobBody, string) (string, error) {
	c.n.Add(1)
	return "id", nil
}

func (c *countRunner) Wait(ctx context.Context, _ string) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestJobTickOnceAcrossTwoStores: two Machines' schedulers, each on its
// own store node, claim the same ticks at once; both inserts succeed
// locally, the merge keeps one, and the settle-then-re-read lets exactly
// one Machine run each tick.
func TestJobTickOnceAcrossTwoStores(t *testing.T) {
	d1, d2 := twoEntries(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now().Truncate(time.Minute)
	// Runs here never end: allow, so each tick starts one.
	jd := jobDecl("report", "* * * * *")
	jd.Schedule.Concurrency = jobs.ConcurrencyAllow
	if _, err := hcall(t, featuretest.Handler(t, d1.jobFeature().Routes(), rpc.CmdPutJobs), rpc.PutJobsRequest{Namespace: "shop-prod", Jobs: []rpc.JobDecl{jd}}); err != nil {
		t.Fatal(err)
	}
	// The job reaches m2's store too; its ticks count from t0.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, ok, _ := store.Jobs(d2.active.store).Get(ctx, "shop-prod/report"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job never reached m2's store")
		}
	}
	for _, d := range []*Daemon{d1, d2} {
		row, _, _ := store.Jobs(d.active.store).Get(ctx, "shop-prod/report")
		row.Body.Since = t0.UnixMilli()
		if _, err := store.Jobs(d.active.store).Put(ctx, row); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	at := t0
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
	r1, r2 := &countRunner{}, &countRunner{}
	mk := func(d *Daemon, r jobs.Runner) *jobs.Scheduler {
		return jobs.New(jobs.Config{Store: d.active.store, MachineID: d.record().ID, Runner: r, Now: now, Grace: 30 * time.Second, Stale: time.Hour,
			Settle: func(ctx context.Context) { d.leaseFeature().Settle(ctx, d.active.store) }})
	}
	s1, s2 := mk(d1, r1), mk(d2, r2)
	for i := 1; i <= 3; i++ {
		mu.Lock()
		at = t0.Add(time.Duration(i)*time.Minute + time.Second)
		mu.Unlock()
		var wg sync.WaitGroup
		for _, s := range []*jobs.Scheduler{s1, s2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Round(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got := r1.n.Load() + r2.n.Load(); got != int32(i) {
			time.Sleep(3 * time.Second)
			k := store.JobRunKey("shop-prod/report", t0.Add(time.Duration(i)*time.Minute).UnixMilli())
			a, _, _ := store.JobRuns(d1.active.store).Get(ctx, k)
			b, _, _ := store.JobRuns(d2.active.store).Get(ctx, k)
			t.Logf("m1 sees %+v\nm2 sees %+v", a, b)
			t.Fatalf("after tick %d: %d + %d runs started, want %d in all", i, r1.n.Load(), r2.n.Load(), i)
		}
	}
	cancel()
	s1.Wait()
	s2.Wait()
}
