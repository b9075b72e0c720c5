// Package jobs is the daemon's scheduled-jobs feature (docs/jobs.md,
// "Scheduled jobs"): put_jobs and list_jobs over the replicated jobs and
// job_runs tables, and the jobs loop, a Machine-local loop
// (docs/architecture.md bet 3) that runs core/jobs' Scheduler: each tick
// this Machine admits is claimed in job_runs and, when won, started here.
//
// It reaches the daemon through Host: how a run starts and whether this
// Machine admits it are the Container commands' (a detached one-off
// through run_container's own create path), how a claim settles is the
// lease feature's.
package jobs
