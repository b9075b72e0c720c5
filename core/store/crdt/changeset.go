package crdt

// SentinelCol is the pseudo column whose version is a row's causal length:
// odd while the row exists, even once it is deleted (the tombstone).
const SentinelCol = "-1"

// Change is one cell (or a row's existence) as last written by its origin.
type Change struct {
	Table      string
	PK         string // canonical JSON array of the primary key values
	Col        string // column name, or SentinelCol
	Val        Value
	ColVersion int64
	CL         int64 // the row's causal length when this cell was written
	Seq        int64
}

// Changeset is the surviving effect of one origin transaction, or, when
// Changes is empty, a range of origin versions whose effects were all
// overwritten (so a peer can close that gap without data).
type Changeset struct {
	Site        string
	Version     int64
	LastVersion int64
	Changes     []Change
}

// Cleared reports whether the changeset only announces overwritten versions.
func (c Changeset) Cleared() bool { return len(c.Changes) == 0 }
