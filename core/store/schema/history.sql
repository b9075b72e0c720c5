-- Operator history, one row per operation (a deploy, rollback, scale,
-- restart, removal, drain or Volume Run), keyed by an id the operation
-- mints, so two operators' rows never collide. Written through the entry
-- Machine (record_history); the row's owner is that Machine.
CREATE TABLE IF NOT EXISTS history (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
