-- TLS certificates for ingress, keyed by name (the domain). Name-keyed
-- last-writer-wins: two Machines renewing the same name converge on one row.
-- owner records the Machine that wrote the current body.
CREATE TABLE IF NOT EXISTS certificates (
    name TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
