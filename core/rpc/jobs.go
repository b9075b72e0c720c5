package rpc

import (
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/store"
)

// Scheduled jobs (docs/jobs.md, "Scheduled jobs"): a deploy stores its
// namespace's jobs through its entry (put_jobs); `ployz jobs ls` reads
// them with their recent runs (list_jobs).
const (
	CmdPutJobs  = "put_jobs"
	CapPutJobs  = "ployz.jobs.put.v1"
	CmdListJobs = "list_jobs"
	CapListJobs = "ployz.jobs.list.v1"
)

// maxJobFilesBytes bounds the shipped files one job carries.
const maxJobFilesBytes = 4 << 20

// JobDecl is one job a deploy stores: its schedule, the deployment it
// came from and the run spec (kind run) with the shipped files it
// mounts, by digest.
type JobDecl struct {
	Service    string            `json:"service"`
	Schedule   jobs.Schedule     `json:"schedule"`
	Deployment string            `json:"deployment,omitempty"`
	Spec       ContainerSpec     `json:"spec"`
	Files      map[string][]byte `json:"files,omitempty"`
}

// PutJobsRequest stores Namespace's jobs; with Prune the namespace's
// other jobs are deleted (the deploy no longer declares them).
type PutJobsRequest struct {
	Namespace string    `json:"namespace"`
	Jobs      []JobDecl `json:"jobs"`
	Prune     bool      `json:"prune,omitempty"`
}

// JobsPut answers put_jobs: the services stored and removed.
type JobsPut struct {
	Stored  []string `json:"stored"`
	Removed []string `json:"removed,omitempty"`
}

// Validate refuses a malformed request, naming the field.
func (r PutJobsRequest) Validate() error {
	if r.Namespace == "" || len(r.Namespace) > 128 || !printable(r.Namespace) {
		return InvalidField("namespace", "%q: want 1 to 128 printable characters", clip(r.Namespace))
	}
	for i, j := range r.Jobs {
		if j.Service == "" || len(j.Service) > 128 || !printable(j.Service) {
			return InvalidField("jobs[].service", "jobs[%d]: %q: want 1 to 128 printable characters", i, clip(j.Service))
		}
		if err := j.Schedule.Validate("schedule"); err != nil {
			return InvalidField("jobs[].schedule", "jobs[%d]: %v", i, err)
		}
		if j.Spec.Image == "" {
			return InvalidField("jobs[].spec.image", "jobs[%d]: required", i)
		}
		if j.Spec.Kind != KindRun {
			return InvalidField("jobs[].spec.kind", "jobs[%d]: %q: a job's runs are of kind %s", i, j.Spec.Kind, KindRun)
		}
		n := 0
		for _, b := range j.Files {
			n += len(b)
		}
		if n > maxJobFilesBytes {
			return InvalidField("jobs[].files", "jobs[%d]: %d bytes: at most %d", i, n, maxJobFilesBytes)
		}
	}
	return nil
}

// ListJobsRequest asks for the jobs of Namespace ("" for all) and each
// one's newest Runs runs (0: 5).
type ListJobsRequest struct {
	Namespace string `json:"namespace,omitempty"`
	Runs      int    `json:"runs,omitempty"`
}

// Validate refuses a malformed request, naming the field.
func (r ListJobsRequest) Validate() error {
	switch {
	case len(r.Namespace) > 128 || !printable(r.Namespace):
		return InvalidField("namespace", "%q: want at most 128 printable characters", clip(r.Namespace))
	case r.Runs < 0 || r.Runs > 500:
		return InvalidField("runs", "%d: want 1 to 500 (0: 5)", r.Runs)
	}
	return nil
}

// JobView is one stored job as list_jobs answers it: Next is its next
// tick (unix ms), Runs its newest runs first.
type JobView struct {
	Namespace   string             `json:"namespace"`
	Service     string             `json:"service"`
	Cron        string             `json:"cron"`
	Timezone    string             `json:"timezone,omitempty"`
	Concurrency string             `json:"concurrency"`
	Deployment  string             `json:"deployment,omitempty"`
	Image       string             `json:"image,omitempty"`
	Next        int64              `json:"next,omitempty"`
	Runs        []store.JobRunBody `json:"runs"`
}

// JobList answers list_jobs, by namespace and service.
type JobList struct {
	Jobs []JobView `json:"jobs"`
}
