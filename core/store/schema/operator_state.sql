-- Saved State revisions, one row per revision keyed by an id its writer
-- mints, so two operators' revisions never collide; their numbers per
-- namespace follow (created_at, id) order on read. The compose file is
-- sealed with the Cluster key by the entry Machine that wrote the row.
CREATE TABLE IF NOT EXISTS revisions (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
-- Deploy records, one per Deploy keyed by its deployment id, rewritten
-- as the Deploy goes.
CREATE TABLE IF NOT EXISTS deploy_records (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
