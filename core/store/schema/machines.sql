-- One row per Machine, keyed by its Machine id and written by that Machine.
-- Entity-keyed: ids are minted by the writer, so rows never collide across
-- Machines. Bodies are JSON, only ever gaining optional fields (additive).
CREATE TABLE IF NOT EXISTS machines (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS machines_owner ON machines (owner);
