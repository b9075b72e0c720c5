package store

import (
	"context"
	"encoding/json"
	"fmt"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// Job run statuses (job_runs body status).
const (
	JobRunRunning   = "running"
	JobRunSucceeded = "succeeded"
	JobRunFailed    = "failed"
	// JobRunSkipped: concurrency forbid and a run of the job was still
	// running at the tick.
	JobRunSkipped = "skipped"
	// JobRunMissed: no scheduler started the tick within the grace
	// period (every eligible ployzd down, say).
	JobRunMissed = "missed"
	// JobRunLost: its Machine stopped reporting the run, or the run's
	// Container was gone before its exit code was read.
	JobRunLost = "lost"
)

// JobBody is one scheduled job (table jobs, keyed JobKey): its schedule
// and the run spec a deploy stored (rpc.ContainerSpec's JSON as `ployz
// run` would send it, kept opaque here) with the shipped files it
// mounts, by digest.
type JobBody struct {
	Namespace   string `json:"namespace"`
	Service     string `json:"service"`
	Cron        string `json:"cron"`
	Timezone    string `json:"timezone,omitempty"`
	Concurrency string `json:"concurrency,omitempty"` // forbid (default) or allow
	Deployment  string `json:"deployment,omitempty"`
	// Since (unix ms) is when the job was first stored: ticks before it
	// are never reported missed.
	Since int64             `json:"since"`
	Spec  json.RawMessage   `json:"spec"`
	Files map[string][]byte `json:"files,omitempty"`
}

// Defaults fills what an older writer left out.
func (b *JobBody) Defaults() {
	if b.Concurrency == "" {
		b.Concurrency = "forbid"
	}
}

// JobKey is a job's key: "<namespace>/<service>".
func JobKey(ns, service string) string { return ns + "/" + service }

// Jobs is the jobs table.
func Jobs(c *sdkstore.Client) sdkstore.Table[JobBody] {
	return sdkstore.NewTable[JobBody](c, "jobs", "id")
}

// JobRunBody is one tick of a job (table job_runs, keyed JobRunKey):
// who claimed it and how the run went. Times are unix ms.
type JobRunBody struct {
	Job    string `json:"job"`
	Tick   int64  `json:"tick"`
	Status string `json:"status"`
	// Machine is the id of the Machine that claimed the tick (and runs
	// it); Nonce is that claim's, so a claim lost in a merge is told
	// from the winner's on the same Machine.
	Machine     string `json:"machine,omitempty"`
	MachineName string `json:"machine_name,omitempty"`
	Nonce       string `json:"nonce,omitempty"`
	Container   string `json:"container,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
	Started     int64  `json:"started,omitempty"`
	Ended       int64  `json:"ended,omitempty"`
	// Seen is when the running Machine last saw the run alive.
	Seen       int64  `json:"seen,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	Error      string `json:"error,omitempty"`
}

// JobRunKey is a tick's key: "<job>@<tick unix ms>".
func JobRunKey(job string, tick int64) string { return fmt.Sprintf("%s@%d", job, tick) }

// JobRuns is the job_runs table.
func JobRuns(c *sdkstore.Client) sdkstore.Table[JobRunBody] {
	return sdkstore.NewTable[JobRunBody](c, "job_runs", "id")
}

// JobRunsOf returns job's runs with a tick at or after since, oldest
// first.
func JobRunsOf(ctx context.Context, c *sdkstore.Client, job string, since int64) ([]sdkstore.Row[JobRunBody], error) {
	return JobRuns(c).Where(ctx, "WHERE json_extract(body, '$.job') = ? AND json_extract(body, '$.tick') >= ? ORDER BY json_extract(body, '$.tick')", job, since)
}

// LiveJobRuns returns what a scheduler round needs of job's runs: those
// with a tick at or after since, and the running ones of any tick.
func LiveJobRuns(ctx context.Context, c *sdkstore.Client, job string, since int64) ([]sdkstore.Row[JobRunBody], error) {
	return JobRuns(c).Where(ctx, "WHERE json_extract(body, '$.job') = ? AND (json_extract(body, '$.tick') >= ? OR json_extract(body, '$.status') = ?) ORDER BY json_extract(body, '$.tick')",
		job, since, JobRunRunning)
}

// ClaimJobRun inserts r only when no row holds its key (the tick's
// lease); claimed is false when another claim was there first. A claim
// through another store may still win the merge: the caller re-reads.
func ClaimJobRun(ctx context.Context, c *sdkstore.Client, r sdkstore.Row[JobRunBody]) (claimed bool, err error) {
	body, err := json.Marshal(r.Body)
	if err != nil {
		return false, fmt.Errorf("job_runs %s: encode body: %w", r.Key, err)
	}
	res, err := c.Exec(ctx, sdkstore.Stmt(`INSERT INTO job_runs (id, owner, body, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
		r.Key, r.Owner, string(body), r.UpdatedAt))
	if err != nil {
		return false, fmt.Errorf("job_runs %s: claim: %w", r.Key, err)
	}
	return len(res.Results) == 1 && res.Results[0].RowsAffected == 1, nil
}
