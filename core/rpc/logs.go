package rpc

// Machine RPCs answered by this Machine's Log Store plugin (a logstore
// kind plugin; Ployz's own is plugins/logstore). ployzd serves them only
// while a healthy plugin advertises the capability of the same name
// (sdk/observe.CapLogHistory, CapTailLogs); otherwise they are refused
// with details.capability naming it.
const (
	// CmdLogHistory returns the stored lines of this Machine's Containers,
	// removed ones included, in a time range.
	CmdLogHistory = "log_history"
	CapLogHistory = "ployz.logs.history.v1"
	// CmdTailLogs (streaming) sends the last lines, then with follow new
	// ones as they are stored; each event is a LogRecord.
	CmdTailLogs = "tail_logs"
	CapTailLogs = "ployz.logs.tail.v1"
)

// Log query bounds.
const (
	DefaultLogLimit = 1000
	MaxLogLimit     = 50000
	MaxLogGrep      = 1024
)

// LogQuery selects stored lines; empty fields match all.
type LogQuery struct {
	Namespace  string `json:"namespace,omitempty"`
	Service    string `json:"service,omitempty"`
	Deployment string `json:"deployment,omitempty"` // id or a prefix of 4+ characters
	Container  string `json:"container,omitempty"`  // name, or id prefix of 4+ characters
	// Grep keeps lines matching this RE2 expression.
	Grep string `json:"grep,omitempty"`
}

// LogHistoryRequest is log_history's request.
type LogHistoryRequest struct {
	LogQuery
	Since int64 `json:"since_unix_nano,omitempty"`
	Until int64 `json:"until_unix_nano,omitempty"` // 0: now
	// Limit caps the lines (default DefaultLogLimit); Newest keeps the
	// last Limit lines of the range instead of the first.
	Limit  int  `json:"limit,omitempty"`
	Newest bool `json:"newest,omitempty"`
}

// TailLogsRequest is tail_logs' request.
type TailLogsRequest struct {
	LogQuery
	Tail   int  `json:"tail,omitempty"` // past lines first
	Follow bool `json:"follow,omitempty"`
}

// LogRecord is one stored line, with the Container that wrote it as the
// store knew it (kept after the Container is removed).
type LogRecord struct {
	Time          int64  `json:"time_unix_nano"`
	Stream        string `json:"stream"`
	Text          string `json:"text"`
	ContainerID   string `json:"container_id"`
	ContainerName string `json:"container_name,omitempty"`
	Namespace     string `json:"namespace,omitempty"`
	Service       string `json:"service,omitempty"`
	Deployment    string `json:"deployment,omitempty"`
}

// LogGap is a part of the range the store cannot answer, and why.
type LogGap struct {
	From   int64  `json:"from_unix_nano"`
	To     int64  `json:"to_unix_nano"`
	Reason string `json:"reason"`
}

// LogHistory is log_history's payload.
type LogHistory struct {
	MachineID string      `json:"machine_id"`
	Lines     []LogRecord `json:"lines"`
	Gaps      []LogGap    `json:"gaps,omitempty"`
	// Truncated: the limit (or the answer size) cut the range.
	Truncated bool `json:"truncated,omitempty"`
	// CorruptBytes counts bytes of Docker's log files the store skipped.
	CorruptBytes uint64 `json:"corrupt_bytes,omitempty"`
}
