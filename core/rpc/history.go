package rpc

import (
	"slices"
	"strings"
	"unicode"

	"github.com/ployz/ployz/core/store"
)

// Operator history commands: the operator library records each operation
// it runs through its entry Machine, which writes the replicated history
// table, so any operator reaching any Machine lists the same history.
const (
	CmdRecordHistory = "record_history"
	CapRecordHistory = "ployz.history.record.v1"
	CmdListHistory   = "list_history"
	CapListHistory   = "ployz.history.list.v1"
)

// History kinds: what an operation was. A newer operator library may
// record kinds an older one does not list; they are kept and listed.
const (
	HistoryDeploy        = "deploy"
	HistoryRollback      = "rollback"
	HistoryScale         = "scale"
	HistoryRestart       = "restart"
	HistoryRemoveService = "remove-service"
	HistoryRemove        = "remove"
	HistoryDrain         = "drain"
	HistoryUndrain       = "undrain"
	HistoryCatchUp       = "catch-up"
	HistoryVolumeRun     = "volume-run"
)

// HistoryKinds are the kinds this version records, for a filter to name.
var HistoryKinds = []string{HistoryDeploy, HistoryRollback, HistoryScale, HistoryRestart, HistoryRemoveService,
	HistoryRemove, HistoryDrain, HistoryUndrain, HistoryCatchUp, HistoryVolumeRun}

// History outcomes.
const (
	OutcomeRunning   = "running"
	OutcomeCompleted = "completed"
	OutcomeUnchanged = "unchanged"
	OutcomePartial   = "partial"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// Limits of a history entry: a row stays small, whatever a caller sends.
const (
	historyMaxID       = 64
	historyMaxDetail   = 512
	historyMaxServices = 64
	// HistoryMaxLimit bounds one list_history answer.
	HistoryMaxLimit = 5000
	// HistoryDefaultLimit is list_history's limit when none is given.
	HistoryDefaultLimit = 50
)

// HistoryEntry is one operation: its id (the row key) and its body.
type HistoryEntry struct {
	ID string `json:"id"`
	store.HistoryBody
	// RecordedBy is the Machine that wrote the row (answers only).
	RecordedBy string `json:"recorded_by,omitempty"`
}

// RecordHistoryRequest writes (or rewrites, same id) one entry.
type RecordHistoryRequest struct {
	Entry HistoryEntry `json:"entry"`
}

// HistoryRecorded answers record_history.
type HistoryRecorded struct {
	ID string `json:"id"`
}

// ListHistoryRequest filters the history: by namespace and kind (empty:
// all), at most Limit entries (0: HistoryDefaultLimit), newest first.
type ListHistoryRequest struct {
	Namespace string `json:"namespace,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// HistoryList answers list_history, newest first.
type HistoryList struct {
	Entries []HistoryEntry `json:"entries"`
}

// Validate refuses a malformed entry, naming the field.
func (r RecordHistoryRequest) Validate() error {
	e := r.Entry
	switch {
	case !isID(e.ID):
		return InvalidField("entry.id", "%q: want 1 to %d letters, digits, '-' or '_'", e.ID, historyMaxID)
	case e.Kind == "" || len(e.Kind) > 32 || !isToken(e.Kind):
		return InvalidField("entry.kind", "%q: want a kind such as %s", e.Kind, strings.Join(HistoryKinds, ", "))
	case e.Revision < 0:
		return InvalidField("entry.revision", "%d: a revision is a number from 1 (0: none)", e.Revision)
	case e.Operator.Name == "" || len(e.Operator.Name) > 128 || !printable(e.Operator.Name):
		return InvalidField("entry.operator.name", "%q: want 1 to 128 printable characters", e.Operator.Name)
	case e.StartedAt <= 0:
		return InvalidField("entry.started_at", "%d: want unix milliseconds", e.StartedAt)
	case e.FinishedAt != 0 && e.FinishedAt < e.StartedAt:
		return InvalidField("entry.finished_at", "%d is before started_at %d", e.FinishedAt, e.StartedAt)
	case !slices.Contains([]string{OutcomeRunning, OutcomeCompleted, OutcomeUnchanged, OutcomePartial, OutcomeFailed, OutcomeCancelled}, e.Outcome):
		return InvalidField("entry.outcome", "%q: want running, completed, unchanged, partial, failed or cancelled", e.Outcome)
	case len(e.Detail) > historyMaxDetail:
		return InvalidField("entry.detail", "%d bytes: at most %d", len(e.Detail), historyMaxDetail)
	case len(e.Services) > historyMaxServices:
		return InvalidField("entry.services", "%d services: at most %d", len(e.Services), historyMaxServices)
	case len(e.Namespace) > 128 || !printable(e.Namespace):
		return InvalidField("entry.namespace", "%q: want at most 128 printable characters", e.Namespace)
	}
	return nil
}

// Validate refuses an unknown kind or a limit out of range, naming the
// field.
func (r ListHistoryRequest) Validate() error {
	switch {
	case r.Kind != "" && !slices.Contains(HistoryKinds, r.Kind):
		return InvalidField("kind", "%q: want one of %s", r.Kind, strings.Join(HistoryKinds, ", "))
	case r.Limit < 0 || r.Limit > HistoryMaxLimit:
		return InvalidField("limit", "%d: want 1 to %d (0: %d)", r.Limit, HistoryMaxLimit, HistoryDefaultLimit)
	case len(r.Namespace) > 128:
		return InvalidField("namespace", "%d bytes: at most 128", len(r.Namespace))
	}
	return nil
}

// Select filters entries by r and orders them newest first (by start,
// then id, so every reader lists the same order), at most r's limit.
// Every Machine answering list_history selects with it.
func (r ListHistoryRequest) Select(entries []HistoryEntry) []HistoryEntry {
	out := make([]HistoryEntry, 0, len(entries))
	for _, e := range entries {
		if (r.Namespace == "" || e.Namespace == r.Namespace) && (r.Kind == "" || e.Kind == r.Kind) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b HistoryEntry) int {
		if a.StartedAt != b.StartedAt {
			if a.StartedAt > b.StartedAt {
				return -1
			}
			return 1
		}
		return strings.Compare(b.ID, a.ID)
	})
	limit := r.Limit
	if limit == 0 {
		limit = HistoryDefaultLimit
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// isID reports whether s is an id a caller mints: 1 to historyMaxID
// letters, digits, '-' or '_'.
func isID(s string) bool { return s != "" && len(s) <= historyMaxID && isToken(s) }

func isToken(s string) bool {
	for _, c := range s {
		if !(c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}
