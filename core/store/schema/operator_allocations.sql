-- Subnet allocation history, one row per Machine an operator enrolled,
-- keyed by its Machine id: the subnet it was given, its name, how the
-- enrollment stands (allocated, joined, failed, removed) and who did it.
-- Written through the entry (put_allocation) before the Machine is
-- published, so a subnet is never given twice, even after a crash
-- between allocating and publishing. Rows are never deleted: a removed
-- Machine's subnet stays taken.
CREATE TABLE IF NOT EXISTS allocations (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
-- Project removal marks, one row per namespace with a pending removal,
-- keyed by the namespace: `ployz project rm` writes it, whichever
-- operator's next deploy or removal finds nothing left deletes it.
CREATE TABLE IF NOT EXISTS removals (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL DEFAULT 0
);
