-- Cluster-wide facts (identity, network, settings), one row per creator-minted id.
-- Entity-keyed: ids are minted by the writer, so rows never collide across
-- Machines. Bodies are JSON, only ever gaining optional fields (additive).
CREATE TABLE IF NOT EXISTS cluster (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS cluster_owner ON cluster (owner);
