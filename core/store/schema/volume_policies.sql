-- Volume protection (compose x-volume on a Provisioned Volume), one row
-- per volume keyed by its name: snapshot retention and the Mirror kept in
-- Sync, written by a deploy. The Writer's Machine acts on it.
CREATE TABLE IF NOT EXISTS volume_policies (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
