package daemon

// Scheduled jobs (docs/jobs.md, "Scheduled jobs"): put_jobs and
// list_jobs, and the jobs loop, a Machine-local loop (docs/architecture.md
// bet 3) that runs core/jobs' Scheduler: each tick this Machine admits is
// claimed in job_runs and, when won, started here as a detached one-off
// run, through run_container's own create path.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

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

func (d *Daemon) jobRoutes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.PutJobs, d.putJobs),
		rpc.Bind(rpc.ListJobs, d.listJobs),
	}
}

// putJobs stores a namespace's jobs (a deploy's), keeping each job's
// Since so ticks before it was first stored are never reported missed.
func (d *Daemon) putJobs(ctx context.Context, req rpc.PutJobsRequest) (rpc.JobsPut, error) {
	st, err := d.checkedStore(req)
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
		if _, err := t.Put(ctx, sdkstore.Row[store.JobBody]{Key: key, Owner: d.record().ID, Body: body}); err != nil {
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
func (d *Daemon) listJobs(ctx context.Context, req rpc.ListJobsRequest) (rpc.JobList, error) {
	st, err := d.checkedStore(req)
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

// jobsLoop runs the Scheduler while this Machine participates; it sleeps
// until the next tick, at most jobsPeriod.
func (d *Daemon) jobsLoop(ctx context.Context) {
	var s *jobs.Scheduler
	w := d.watchStore(ctx, `SELECT id, body FROM jobs`)
	for {
		wait := jobsPeriod
		if s == nil {
			s = d.newScheduler()
			if s != nil {
				defer s.Wait()
			}
		}
		if s != nil && d.record().Phase == machine.Participating {
			next, err := s.Round(ctx)
			if err != nil && ctx.Err() == nil {
				d.log.Debug("jobs: round", "error", err)
			}
			if until := time.Until(next); !next.IsZero() && until < wait {
				wait = max(until, 10*time.Millisecond)
			}
		}
		if !pause(ctx, w, wait) {
			return
		}
	}
}

// newScheduler is this Machine's Scheduler, nil until it has a store
// and Docker.
func (d *Daemon) newScheduler() *jobs.Scheduler {
	st, err := d.storeClient()
	if err != nil || d.ctrs == nil || d.ctrs.docker == nil {
		return nil
	}
	rec := d.record()
	return jobs.New(jobs.Config{Store: st, MachineID: rec.ID, MachineName: rec.Name, Runner: jobRunner{o: d.ctrs},
		Admits: d.admitsJob, Outcome: d.jobOutcomes.Record, Settle: func(ctx context.Context) { d.leaseFeature().Settle(ctx, st) }, Log: d.log.Named("jobs")})
}

// admitsJob: this Machine runs a job only when it would admit the run's
// Container (participating, not drained, roles and constraints, the
// Writer of its Provisioned Volumes) and holds its Docker volumes: a run
// mounts the Service's data where it is, never an empty copy.
func (d *Daemon) admitsJob(ctx context.Context, job store.JobBody) bool {
	var spec rpc.ContainerSpec
	if err := json.Unmarshal(job.Spec, &spec); err != nil {
		return false
	}
	if admit(spec, d.ctrs.facts()) != nil {
		return false
	}
	for _, m := range spec.Mounts {
		if m.Type == "volume" && m.Source != "" {
			if _, err := d.ctrs.docker.VolumeInspect(ctx, m.Source); err != nil {
				return false
			}
		}
	}
	return true
}

// jobRunner starts a job's runs as detached one-offs of kind run (the
// run reaper removes them once ended and logged, as `ployz run --detach`
// runs), pulling a missing image without credentials first.
type jobRunner struct{ o *containerOps }

func (r jobRunner) Start(ctx context.Context, job store.JobBody, name string) (string, error) {
	var spec rpc.ContainerSpec
	if err := json.Unmarshal(job.Spec, &spec); err != nil {
		return "", fmt.Errorf("job %s/%s: stored spec: %w", job.Namespace, job.Service, err)
	}
	spec.Kind = rpc.KindRun
	if _, err := r.o.docker.ImageInspect(ctx, spec.Image); cerrdefs.IsNotFound(err) {
		if _, err := r.o.pull(ctx, rpc.PullImageRequest{Image: spec.Image}, nil); err != nil {
			return "", fmt.Errorf("pull %s: %w", spec.Image, err)
		}
	}
	req := rpc.RunContainerRequest{CreateContainerRequest: rpc.CreateContainerRequest{Name: name, Spec: spec, Files: job.Files}, Detach: true}
	ob, err := r.o.create(ctx, req.CreateContainerRequest, runCreate(req))
	if err != nil {
		return "", err
	}
	if _, err := r.o.start(ctx, ob.ID); err != nil {
		r.o.discardRun(ctx, ob.ID)
		return "", err
	}
	return ob.ID, nil
}

func (r jobRunner) Wait(ctx context.Context, id string) (int, error) {
	waitC, errC := r.o.docker.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		if w.Error != nil && w.Error.Message != "" {
			return int(w.StatusCode), errors.New(w.Error.Message)
		}
		return int(w.StatusCode), nil
	case err := <-errC:
		if cerrdefs.IsNotFound(err) {
			return 0, jobs.ErrGone
		}
		return 0, err
	}
}
