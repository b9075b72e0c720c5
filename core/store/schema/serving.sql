-- Serving Pointers, one per Service, keyed by "namespace/service".
-- Name-keyed, last writer wins: the newest Deploy's move is the pointer.
-- owner records the Machine that wrote it (the Deploy's entry Machine).
CREATE TABLE IF NOT EXISTS serving (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
-- Ingress Proxy acks, one row per Machine, written by that Machine's proxy:
-- which Serving Pointer of each Service its loaded config follows.
CREATE TABLE IF NOT EXISTS serving_acks (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
