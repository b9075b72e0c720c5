package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// storeJobs stores the plan's scheduled jobs through the entry
// (put_jobs), each with the shipped files its spec mounts; unless prune
// is off, the namespace's jobs the compose file no longer declares are
// deleted. An entry from before scheduled jobs is refused only when the
// plan has jobs.
func (s *Session) storeJobs(ctx context.Context, p deploy.Plan, files map[string][]byte, prune bool) error {
	req := rpc.PutJobsRequest{Namespace: p.Namespace, Jobs: []rpc.JobDecl{}, Prune: prune}
	for _, j := range p.Jobs {
		d := rpc.JobDecl{Service: j.Service, Schedule: j.Schedule, Deployment: p.DeploymentID, Spec: j.Spec}
		for _, f := range j.Spec.Files {
			if b, ok := files[f.Digest]; ok {
				if d.Files == nil {
					d.Files = map[string][]byte{}
				}
				d.Files[f.Digest] = b
			}
		}
		req.Jobs = append(req.Jobs, d)
	}
	var out rpc.JobsPut
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.PutJobs, req, &out)
	return putThroughEntry(err, "the scheduled jobs of "+p.Namespace, rpc.CmdPutJobs, len(p.Jobs) > 0)
}

// putThroughEntry is the outcome of a deploy's put through the entry
// (what it stored, by command cmd): an entry from before cmd is refused
// only when there was something to store.
func putThroughEntry(err error, what, cmd string, some bool) error {
	var e *rpc.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e) && e.Code == rpc.CodeUnsupported && !some:
		return nil
	case errors.As(err, &e) && e.Code == rpc.CodeUnsupported:
		return fmt.Errorf("store %s: the entry Machine does not serve %s: upgrade it (`ployz machine upgrade`)", what, cmd)
	default:
		return fmt.Errorf("store %s: %w", what, err)
	}
}

// JobsRequest lists the scheduled jobs of Namespace ("" for every
// namespace) with each one's newest Runs runs.
type JobsRequest struct {
	Namespace string
	Runs      int
}

// Job is one scheduled job as `ployz jobs ls` shows it.
type Job struct {
	Namespace   string         `json:"namespace"`
	Service     string         `json:"service"`
	Schedule    string         `json:"schedule"`
	Timezone    string         `json:"timezone,omitempty"`
	Concurrency string         `json:"concurrency"`
	Image       string         `json:"image,omitempty"`
	Next        *time.Time     `json:"next,omitempty"`
	Runs        []JobRunRecord `json:"runs"`
}

// JobRunRecord is one tick of a job: its status, Machine, Container,
// times, exit code and duration.
type JobRunRecord struct {
	Tick      time.Time  `json:"tick"`
	Status    string     `json:"status"`
	Machine   string     `json:"machine,omitempty"`
	Container string     `json:"container,omitempty"`
	Started   *time.Time `json:"started,omitempty"`
	Ended     *time.Time `json:"ended,omitempty"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	Duration  string     `json:"duration,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Failed reports whether the run ended badly: a non-zero exit, not
// started, lost or missed.
func (r JobRunRecord) Failed() bool { return jobs.Failed(r.Status) }

// JobList is the entry's list_jobs answer as it came (the dashboard
// reads it whole).
func (s *Session) JobList(ctx context.Context, req JobsRequest) (rpc.JobList, error) {
	var l rpc.JobList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListJobs, rpc.ListJobsRequest{Namespace: req.Namespace, Runs: req.Runs}, &l); err != nil {
		var e *rpc.Error
		if errors.As(err, &e) && e.Code == rpc.CodeUnsupported {
			return rpc.JobList{}, fmt.Errorf("the entry Machine does not serve %s (scheduled jobs): upgrade it (`ployz machine upgrade`)", rpc.CmdListJobs)
		}
		return rpc.JobList{}, err
	}
	return l, nil
}

// Jobs lists the stored scheduled jobs, newest runs first.
func (s *Session) Jobs(ctx context.Context, req JobsRequest) ([]Job, error) {
	l, err := s.JobList(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]Job, 0, len(l.Jobs))
	for _, v := range l.Jobs {
		j := Job{Namespace: v.Namespace, Service: v.Service, Schedule: v.Cron, Timezone: v.Timezone, Concurrency: v.Concurrency,
			Image: v.Image, Next: msTime(v.Next), Runs: []JobRunRecord{}}
		for _, r := range v.Runs {
			j.Runs = append(j.Runs, jobRunRecord(r))
		}
		out = append(out, j)
	}
	return out, nil
}

func jobRunRecord(r store.JobRunBody) JobRunRecord {
	rec := JobRunRecord{Tick: time.UnixMilli(r.Tick).UTC(), Status: r.Status, Machine: r.MachineName, Container: r.Container,
		Started: msTime(r.Started), Ended: msTime(r.Ended), ExitCode: r.ExitCode, Error: r.Error}
	if rec.Machine == "" {
		rec.Machine = r.Machine
	}
	if r.DurationMS > 0 {
		rec.Duration = (time.Duration(r.DurationMS) * time.Millisecond).Round(100 * time.Millisecond).String()
	}
	return rec
}

// msTime is unix ms as a time, nil for 0.
func msTime(ms int64) *time.Time {
	if ms <= 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// FailedJobs are the jobs whose newest run failed (Runs newest first).
func FailedJobs(jobs []Job) []Job {
	var out []Job
	for _, j := range jobs {
		if len(j.Runs) > 0 && j.Runs[0].Failed() {
			out = append(out, j)
		}
	}
	return out
}

// FailedJobsOf are the jobs of ns (every namespace for "") whose newest
// run failed, only service's when it is set, for `ployz ps` to show
// beside the Containers: never nil, and none when the entry cannot say
// (an entry without jobs answers none).
func (s *Session) FailedJobsOf(ctx context.Context, ns, service string) []Job {
	jobs, _ := s.Jobs(ctx, JobsRequest{Namespace: ns, Runs: 1})
	failed := append([]Job{}, FailedJobs(jobs)...)
	if service != "" {
		failed = slices.DeleteFunc(failed, func(j Job) bool { return j.Service != service })
	}
	return failed
}
