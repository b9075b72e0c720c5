package jobs

import (
	"sort"
	"strings"
	"sync"

	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/observe"
)

// Outcomes counts the run outcomes a Scheduler records (its
// Config.Outcome) for the metrics plugin: per job, runs by final status,
// the last run's status and the last success. Counts start at zero with
// the process, as a Prometheus counter does.
type Outcomes struct {
	mu   sync.Mutex
	jobs map[string]*observe.JobRuns
}

// Record counts run b's final status.
func (o *Outcomes) Record(b store.JobRunBody) {
	ns, svc, _ := strings.Cut(b.Job, "/")
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.jobs == nil {
		o.jobs = map[string]*observe.JobRuns{}
	}
	j := o.jobs[b.Job]
	if j == nil {
		j = &observe.JobRuns{Namespace: ns, Service: svc, ByStatus: map[string]int64{}}
		o.jobs[b.Job] = j
	}
	j.ByStatus[b.Status]++
	if b.Status == store.JobRunSkipped {
		return // a tick not run: the last run's status stands
	}
	j.LastStatus = b.Status
	if b.Status == store.JobRunSucceeded {
		j.LastSuccess = max(j.LastSuccess, b.Ended)
	}
}

// Snapshot is a copy of the counts, sorted by namespace and service.
func (o *Outcomes) Snapshot() []observe.JobRuns {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]observe.JobRuns, 0, len(o.jobs))
	for _, j := range o.jobs {
		c := *j
		c.ByStatus = make(map[string]int64, len(j.ByStatus))
		for k, v := range j.ByStatus {
			c.ByStatus[k] = v
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace < out[j].Namespace || out[i].Namespace == out[j].Namespace && out[i].Service < out[j].Service
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
