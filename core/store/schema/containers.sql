-- One row per Container, keyed by a creator-minted id; owner is the Machine running it.
-- Entity-keyed: ids are minted by the writer, so rows never collide across
-- Machines. Bodies are JSON, only ever gaining optional fields (additive).
CREATE TABLE IF NOT EXISTS containers (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS containers_owner ON containers (owner);
