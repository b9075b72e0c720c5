-- Leases, one per scope ("namespace:<ns>", "volume:<name>", "enroll"):
-- who runs a mutating command there and until when. Written only through
-- an entry's acquire_lease, which writes when the row is absent, expired
-- or its own, then re-reads after the write settles. owner records the
-- entry Machine that wrote it.
CREATE TABLE IF NOT EXISTS leases (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
