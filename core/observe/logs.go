package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Caller is what the helpers need of a connection to an Entry Machine
// (*rpc.Client).
type Caller interface {
	Fanout(ctx context.Context, t rpc.Target, command string, payload any) (rpc.FanoutResult, error)
	Call(ctx context.Context, t rpc.Target, command string, payload, out any) error
}

// Line is one line as printed, with the Machine it came from.
type Line struct {
	Machine string `json:"machine"`
	rpc.LogRecord
}

// Failure names a Machine that did not answer, and why.
type Failure struct {
	Machine string `json:"machine"`
	Error   string `json:"error"`
}

// Logs is a merged log_history answer.
type Logs struct {
	Lines  []Line    `json:"lines"`
	Failed []Failure `json:"failed"`
	// Notes are what the answers said: gaps, truncation, corrupt bytes.
	Notes []string `json:"notes"`
}

// Partial lists the Machines whose answer is missing.
func (l Logs) Partial() []string {
	var out []string
	for _, f := range l.Failed {
		out = append(out, f.Machine)
	}
	return out
}

// History asks the Machines t names for req's lines (log_history) and
// merges them by time. A Machine that cannot serve it (no logstore plugin
// serving, or a ployzd that predates the Log Store) is named with the way
// out; there is no Docker-direct fallback (the routes are retired).
func History(ctx context.Context, c Caller, t rpc.Target, req rpc.LogHistoryRequest) (Logs, error) {
	fr, err := rpc.FanoutMethod(ctx, c, t, rpc.ReadLogHistory, req)
	if err != nil {
		return Logs{}, fmt.Errorf("logs: %w", err)
	}
	return MergeHistory(fr, req), nil
}

// MergeHistory merges a log_history fan-out; a Machine that refused or
// failed is listed as failed, with the reason.
func MergeHistory(fr rpc.FanoutResult, req rpc.LogHistoryRequest) Logs {
	m := merger{req: req}
	m.add(fr)
	return m.finish()
}

// merger collects the answers of one History.
type merger struct {
	req rpc.LogHistoryRequest
	out Logs
}

func (m *merger) add(fr rpc.FanoutResult) {
	for _, r := range fr.Results {
		name := r.Machine()
		if r.Error != nil {
			m.out.Failed = append(m.out.Failed, Failure{Machine: name, Error: Refusal(r.Error)})
			continue
		}
		var h rpc.LogHistory
		if err := json.Unmarshal(r.Payload, &h); err != nil {
			m.out.Failed = append(m.out.Failed, Failure{Machine: name, Error: "malformed log_history answer: " + err.Error()})
			continue
		}
		for _, l := range h.Lines {
			m.out.Lines = append(m.out.Lines, Line{Machine: name, LogRecord: l})
		}
		for _, g := range h.Gaps {
			m.note("%s: no lines from %s to %s: %s", name, FmtTime(g.From), FmtTime(g.To), g.Reason)
		}
		if h.Truncated && !m.req.Newest {
			m.note("%s: more than %d lines in the range; narrow it with --since/--until", name, m.req.Limit)
		}
		if h.CorruptBytes > 0 {
			m.note("%s: its Log Store skipped %d corrupt bytes of Docker's log files", name, h.CorruptBytes)
		}
	}
	for _, o := range fr.Omitted {
		m.out.Failed = append(m.out.Failed, Failure{Machine: o.Machine(), Error: o.Reason})
	}
}

func (m *merger) note(format string, args ...any) {
	m.out.Notes = append(m.out.Notes, fmt.Sprintf(format, args...))
}

// finish orders the lines by time, keeps the newest Limit when asked, and
// sorts the Machines named.
func (m *merger) finish() Logs {
	out := m.out
	sort.SliceStable(out.Lines, func(i, j int) bool { return out.Lines[i].Time < out.Lines[j].Time })
	if m.req.Newest && m.req.Limit > 0 && len(out.Lines) > m.req.Limit {
		out.Lines = out.Lines[len(out.Lines)-m.req.Limit:]
	}
	sort.Slice(out.Failed, func(i, j int) bool { return out.Failed[i].Machine < out.Failed[j].Machine })
	return out
}

// Refusal explains a Machine's refusal, with the way out when its ployzd
// or its Log Store plugin cannot serve logs.
func Refusal(e *rpc.Error) string {
	switch {
	case e.Code == rpc.CodeUnsupported && e.Details["command"] != nil:
		return e.Error() + " (its ployzd predates the Log Store; upgrade it)"
	case e.Details["capability"] != nil:
		return e.Error() + " (its logstore plugin is not serving; see `ployz machine inspect`)"
	}
	return e.Error()
}

// FmtTime prints a time of an answer; 0 is the start of the store.
func FmtTime(ns int64) string {
	if ns == 0 {
		return "the start"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339)
}
