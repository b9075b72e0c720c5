package jobs

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

const (
	// jobsPeriod bounds the jobs loop's sleep: a new job, a run that
	// ended elsewhere, a tick are all seen within it.
	jobsPeriod = 10 * time.Second
	// jobRunsDefault is list_jobs' runs per job when the caller names none.
	jobRunsDefault = 5
)

// Host is what the feature needs of the daemon.
type Host interface {
	feature.StoreHost
	// Machine is this Machine's record (its ID, name and phase).
	Machine() machine.Record
	// WatchStore follows queries on this Machine's store until ctx ends.
	WatchStore(ctx context.Context, queries ...string) *sdkstore.Watch
	// JobRunner starts this Machine's runs; nil while it has no Docker.
	JobRunner() jobs.Runner
	// AdmitsJob reports whether this Machine may run job now.
	AdmitsJob(ctx context.Context, job store.JobBody) bool
	// Settle waits, after a claim written to st, for a concurrent claim
	// through another Machine to reach it (the lease feature's Settle).
	Settle(ctx context.Context, st *sdkstore.Client)
}

// Feature serves the job commands and runs the jobs loop. Make one per
// Machine: it counts the outcomes its Scheduler records.
type Feature struct {
	host Host
	log  hclog.Logger
	// outcomes counts the job runs this Machine's Scheduler recorded an
	// outcome for, for the metrics plugin.
	outcomes jobs.Outcomes
}

// New returns the feature over host.
func New(host Host, log hclog.Logger) *Feature { return &Feature{host: host, log: log} }

// Outcomes is what this Machine's Scheduler counted, for the metrics
// plugin.
func (f *Feature) Outcomes() *jobs.Outcomes { return &f.outcomes }

// Routes are put_jobs and list_jobs.
func (f *Feature) Routes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.PutJobs, f.putJobs),
		rpc.Bind(rpc.ListJobs, f.listJobs),
	}
}

// putJobs stores a namespace's jobs (a deploy's), keeping each job's
// Since so ticks before it was first stored are never reported missed.
func (f *Feature) putJobs(ctx context.Context, req rpc.PutJobsRequest) (rpc.JobsPut, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.JobsPut{}, err
	}
	t := store.Jobs(st)
	out := rpc.JobsPut{Stored: []string{}}
	now := time.Now().UnixMilli()
	for _, j := range req.Jobs {
		key := store.JobKey(req.Namespace, j.Service)
		since := now
		if old, ok, err := t.Get(ctx, key); err != nil {
			return rpc.JobsPut{}, rpc.Errorf(rpc.CodeUnavailable, "read job %s: %v", key, err)
		} else if ok && old.Body.Since > 0 {
			since = old.Body.Since
		}
		spec, _ := json.Marshal(j.Spec)
		body := store.JobBody{Namespace: req.Namespace, Service: j.Service, Cron: j.Schedule.Cron, Timezone: j.Schedule.Timezone,
			Concurrency: j.Schedule.Concurrency, Deployment: j.Deployment, Since: since, Spec: spec, Files: j.Files}
		if _, err := t.Put(ctx, sdkstore.Row[store.JobBody]{Key: key, Owner: f.host.MachineID(), Body: body}); err != nil {
			return rpc.JobsPut{}, rpc.Errorf(rpc.CodeUnavailable, "write job %s: %v", key, err)
		}
		out.Stored = append(out.Stored, j.Service)
	}
	if req.Prune {
		rows, err := t.Where(ctx, "WHERE json_extract(body, '$.namespace') = ?", req.Namespace)
		if err != nil {
			return rpc.JobsPut{}, rpc.Errorf(rpc.CodeUnavailable, "read jobs of %s: %v", req.Namespace, err)
		}
		for _, r := range rows {
			if slices.Contains(out.Stored, r.Body.Service) {
				continue
			}
			if _, err := t.Delete(ctx, r.Key); err != nil {
				return rpc.JobsPut{}, rpc.Errorf(rpc.CodeUnavailable, "delete job %s: %v", r.Key, err)
			}
			out.Removed = append(out.Removed, r.Body.Service)
		}
	}
	return out, nil
}

// listJobs answers the stored jobs with their next tick and newest runs.
func (f *Feature) listJobs(ctx context.Context, req rpc.ListJobsRequest) (rpc.JobList, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.JobList{}, err
	}
	return listJobs(ctx, st, req, time.Now())
}

func listJobs(ctx context.Context, st *sdkstore.Client, req rpc.ListJobsRequest, now time.Time) (rpc.JobList, error) {
	rows, err := store.Jobs(st).List(ctx)
	if err != nil {
		return rpc.JobList{}, rpc.Errorf(rpc.CodeUnavailable, "read jobs: %v", err)
	}
	limit := req.Runs
	if limit == 0 {
		limit = jobRunsDefault
	}
	out := rpc.JobList{Jobs: []rpc.JobView{}}
	for _, r := range rows {
		b := r.Body
		if req.Namespace != "" && b.Namespace != req.Namespace {
			continue
		}
		v := rpc.JobView{Namespace: b.Namespace, Service: b.Service, Cron: b.Cron, Timezone: b.Timezone, Concurrency: b.Concurrency,
			Deployment: b.Deployment, Runs: []store.JobRunBody{}}
		var spec rpc.ContainerSpec
		if json.Unmarshal(b.Spec, &spec) == nil {
			v.Image = spec.Image
		}
		if n := (jobs.Schedule{Cron: b.Cron, Timezone: b.Timezone}).Next(now); !n.IsZero() {
			v.Next = n.UnixMilli()
		}
		runs, err := store.JobRuns(st).Where(ctx, "WHERE json_extract(body, '$.job') = ? ORDER BY json_extract(body, '$.tick') DESC LIMIT ?", r.Key, limit)
		if err != nil {
			return rpc.JobList{}, rpc.Errorf(rpc.CodeUnavailable, "read runs of %s: %v", r.Key, err)
		}
		for _, run := range runs {
			if jobs.Stale(run.Body, now, 0) {
				run.Body.Status, run.Body.Error = store.JobRunLost, "its Machine stopped reporting the run"
			}
			v.Runs = append(v.Runs, run.Body)
		}
		out.Jobs = append(out.Jobs, v)
	}
	sort.Slice(out.Jobs, func(i, j int) bool {
		a, b := out.Jobs[i], out.Jobs[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Service < b.Service
	})
	return out, nil
}

// Loop runs the Scheduler while this Machine participates; it sleeps
// until the next tick, at most jobsPeriod.
func (f *Feature) Loop(ctx context.Context) {
	var s *jobs.Scheduler
	w := f.host.WatchStore(ctx, `SELECT id, body FROM jobs`)
	for {
		wait := jobsPeriod
		if s == nil {
			s = f.newScheduler()
			if s != nil {
				defer s.Wait()
			}
		}
		if s != nil && f.host.Machine().Phase == machine.Participating {
			next, err := s.Round(ctx)
			if err != nil && ctx.Err() == nil {
				f.log.Debug("jobs: round", "error", err)
			}
			if until := time.Until(next); !next.IsZero() && until < wait {
				wait = max(until, 10*time.Millisecond)
			}
		}
		if !feature.Pause(ctx, w, wait) {
			return
		}
	}
}

// newScheduler is this Machine's Scheduler, nil until it has a store
// and Docker.
func (f *Feature) newScheduler() *jobs.Scheduler {
	st, err := f.host.Store()
	runner := f.host.JobRunner()
	if err != nil || runner == nil {
		return nil
	}
	rec := f.host.Machine()
	return jobs.New(jobs.Config{Store: st, MachineID: rec.ID, MachineName: rec.Name, Runner: runner,
		Admits: f.host.AdmitsJob, Outcome: f.outcomes.Record, Settle: func(ctx context.Context) { f.host.Settle(ctx, st) }, Log: f.log.Named("jobs")})
}
