// Package jobs runs scheduled jobs (compose x-schedule): the schedule a
// Service declares, and the Machine-local Scheduler every eligible
// ployzd runs. Each tick of a job is claimed by a conditional insert of
// its job_runs row, so one Machine runs it; the row then records the
// run (Machine, Container, start, end, exit code), or the tick skipped
// (concurrency forbid) or missed (nobody started it in time).
// docs/jobs.md, "Scheduled jobs".
package jobs
