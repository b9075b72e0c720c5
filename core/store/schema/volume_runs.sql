-- Volume Runs, one row per run keyed "<volume>/<gen>": the operator's
-- bookkeeping of each run (its steps and outcome, who drove it and the
-- volume lease it held), so every operator's runs number on from one
-- another's gens and any operator can finish what another left. Written
-- only through an entry's begin_volume_run and put_volume_run.
CREATE TABLE IF NOT EXISTS volume_runs (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
