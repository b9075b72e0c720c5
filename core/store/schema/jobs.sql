-- Scheduled jobs (compose x-schedule), one row per job keyed
-- "<namespace>/<service>": its schedule and the spec a run is started
-- from, written by a deploy. Any eligible Machine's scheduler reads it.
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
-- Job runs, one row per job and tick keyed "<namespace>/<service>@<tick
-- unix ms>": the lease on the tick (the first scheduler whose insert
-- survives the merge runs it), then the run's outcome, or a tick
-- recorded skipped or missed. owner is the Machine that claimed it.
CREATE TABLE IF NOT EXISTS job_runs (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
