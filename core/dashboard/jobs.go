package dashboard

import (
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// JobRunsShown is how many newest runs per job the Jobs page asks for.
const JobRunsShown = 10

// Jobs is the Jobs page: the scheduled jobs, as `ployz jobs ls` lists
// them, with their failures marked.
type Jobs struct {
	Jobs []Job `json:"jobs"`
}

// Job is one scheduled job: its schedule, next tick (unix ms) and newest
// runs first. Failing is set when its newest run failed (jobs.Failed).
type Job struct {
	rpc.JobView
	Runs    []JobRun `json:"runs"`
	Failing bool     `json:"failing"`
}

// JobRun is one tick's run; Failed marks a failure to highlight.
type JobRun struct {
	store.JobRunBody
	Failed bool `json:"failed"`
}

// JobsPage is the Jobs page of a list_jobs answer.
func JobsPage(l rpc.JobList) Jobs {
	out := Jobs{Jobs: []Job{}}
	for _, v := range l.Jobs {
		j := Job{JobView: v, Runs: []JobRun{}}
		j.JobView.Runs = nil
		for _, r := range v.Runs {
			j.Runs = append(j.Runs, JobRun{JobRunBody: r, Failed: jobs.Failed(r.Status)})
		}
		j.Failing = len(j.Runs) > 0 && j.Runs[0].Failed
		out.Jobs = append(out.Jobs, j)
	}
	return out
}
