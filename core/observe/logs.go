package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Caller is what the helpers need of a connection to an Entry Machine
// (*rpc.Client).
type Caller interface {
	Fanout(ctx context.Context, t rpc.Target, command string, payload any) (rpc.FanoutResult, error)
	Call(ctx context.Context, t rpc.Target, command string, payload, out any) error
}

// SourceDocker marks a line read through a Machine's Docker-direct
// fallback rather than its Log Store.
const SourceDocker = "docker"

// Line is one line as printed: which Machine it came from, and (Source)
// whether it came from the fallback.
type Line struct {
	Machine string `json:"machine"`
	Source  string `json:"source,omitempty"`
	rpc.LogRecord
}

// Failure names a Machine that did not answer, and why.
type Failure struct {
	Machine string `json:"machine"`
	Error   string `json:"error"`
}

// Fallback names a Machine whose lines came from Docker's own logs of its
// existing Containers: why its Log Store did not answer, and how many
// Containers were read.
type Fallback struct {
	Machine    string `json:"machine"`
	Reason     string `json:"reason"`
	Containers int    `json:"containers"`
}

// Logs is a merged log_history answer.
type Logs struct {
	Lines    []Line     `json:"lines"`
	Failed   []Failure  `json:"failed"`
	Fallback []Fallback `json:"fallback,omitempty"`
	// Notes are what the answers said: gaps, truncation, corrupt bytes.
	Notes []string `json:"notes"`
}

// Partial lists the Machines whose answer is missing or incomplete: those
// that failed and those read through the fallback (removed Containers'
// output is missing there).
func (l Logs) Partial() []string {
	var out []string
	for _, f := range l.Failed {
		out = append(out, f.Machine)
	}
	for _, f := range l.Fallback {
		out = append(out, f.Machine+" (fallback)")
	}
	return out
}

// History asks the Machines t names for req's lines (log_history), reads
// a Machine that cannot serve it through the fallback, and merges all by
// time.
func History(ctx context.Context, c Caller, t rpc.Target, req rpc.LogHistoryRequest) (Logs, error) {
	fr, err := c.Fanout(ctx, t, rpc.CmdLogHistory, req)
	if err != nil {
		return Logs{}, fmt.Errorf("logs: %w", err)
	}
	m := merger{req: req}
	m.add(fr)
	for _, r := range m.refused {
		m.fallback(ctx, c, r)
	}
	return m.finish(), nil
}

// MergeHistory merges a log_history fan-out without the fallback: a
// Machine that refused is listed as failed.
func MergeHistory(fr rpc.FanoutResult, req rpc.LogHistoryRequest) Logs {
	m := merger{req: req}
	m.add(fr)
	for _, r := range m.refused {
		m.out.Failed = append(m.out.Failed, Failure{Machine: r.name, Error: Refusal(r.err)})
	}
	return m.finish()
}

// merger collects the answers of one History.
type merger struct {
	req     rpc.LogHistoryRequest
	out     Logs
	refused []refusal
}

// refusal is a Machine that answered but cannot serve log_history: its
// ployzd predates it, or its logstore plugin is not serving.
type refusal struct {
	id, name string
	err      *rpc.Error
}

func machineName(id, name string) string {
	if name == "" {
		return id
	}
	return name
}

func (m *merger) add(fr rpc.FanoutResult) {
	for _, r := range fr.Results {
		name := machineName(r.MachineID, r.MachineName)
		if r.Error != nil {
			if canFallBack(r.Error) {
				m.refused = append(m.refused, refusal{id: r.MachineID, name: name, err: r.Error})
			} else {
				m.out.Failed = append(m.out.Failed, Failure{Machine: name, Error: Refusal(r.Error)})
			}
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
		m.out.Failed = append(m.out.Failed, Failure{Machine: machineName(o.MachineID, o.MachineName), Error: o.Reason})
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
	sort.Slice(out.Fallback, func(i, j int) bool { return out.Fallback[i].Machine < out.Fallback[j].Machine })
	return out
}

// canFallBack says whether a Machine's refusal leaves its Docker-direct
// route worth asking: its ployzd does not know log_history, or its
// logstore plugin is not serving.
func canFallBack(e *rpc.Error) bool {
	return (e.Code == rpc.CodeUnsupported && e.Details["command"] != nil) || e.Details["capability"] != nil
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

// fallback reads r's Machine through list_containers and container_logs:
// the existing Containers req selects, their lines within req's range.
func (m *merger) fallback(ctx context.Context, c Caller, r refusal) {
	lines, n, err := dockerLines(ctx, c, r.id, m.req)
	if err != nil {
		m.out.Failed = append(m.out.Failed, Failure{Machine: r.name,
			Error: Refusal(r.err) + "; its Docker-direct logs failed too: " + err.Error()})
		return
	}
	for _, l := range lines {
		m.out.Lines = append(m.out.Lines, Line{Machine: r.name, Source: SourceDocker, LogRecord: l})
	}
	m.out.Fallback = append(m.out.Fallback, Fallback{Machine: r.name, Reason: Refusal(r.err), Containers: n})
}

// dockerLines are the lines of Machine id's existing Containers that req
// selects, read from Docker, and how many Containers were read.
func dockerLines(ctx context.Context, c Caller, id string, req rpc.LogHistoryRequest) ([]rpc.LogRecord, int, error) {
	var grep *regexp.Regexp
	if req.Grep != "" {
		re, err := regexp.Compile(req.Grep)
		if err != nil {
			return nil, 0, fmt.Errorf("grep: %w", err)
		}
		grep = re
	}
	var list rpc.ContainerList
	if err := c.Call(ctx, rpc.Target{One: id}, rpc.CmdListContainers, rpc.ListContainersRequest{Namespace: req.Namespace}, &list); err != nil {
		return nil, 0, fmt.Errorf("list containers: %w", err)
	}
	tail := req.Limit
	if tail <= 0 {
		tail = rpc.DefaultLogLimit
	}
	var out []rpc.LogRecord
	n := 0
	for _, ct := range list.Containers {
		if !selects(req.LogQuery, ct) {
			continue
		}
		var logs rpc.ContainerLogs
		lr := rpc.ContainerLogsRequest{ID: ct.ID, Tail: tail, Since: req.Since / 1e9}
		if err := c.Call(ctx, rpc.Target{One: id}, rpc.CmdContainerLogs, lr, &logs); err != nil {
			return nil, 0, fmt.Errorf("logs of %s: %w", ct.Name, err)
		}
		n++
		for _, l := range logs.Lines {
			if l.Time < req.Since || (req.Until != 0 && l.Time > req.Until) || (grep != nil && !grep.MatchString(l.Text)) {
				continue
			}
			out = append(out, rpc.LogRecord{Time: l.Time, Stream: l.Stream, Text: l.Text, ContainerID: ct.ID, ContainerName: ct.Name,
				Namespace: ct.Namespace, Service: ct.Service, Deployment: ct.Deployment})
		}
	}
	return out, n, nil
}

// selects matches a Container as the Log Store's selector does.
func selects(q rpc.LogQuery, c rpc.ContainerObservation) bool {
	prefix := func(want, name, id string) bool {
		return want == "" || want == name || (len(want) >= 4 && strings.HasPrefix(id, want))
	}
	return (q.Namespace == "" || q.Namespace == c.Namespace) && (q.Service == "" || q.Service == c.Service) &&
		prefix(q.Deployment, c.Deployment, c.Deployment) && prefix(q.Container, c.Name, c.ID)
}

// FmtTime prints a time of an answer; 0 is the start of the store.
func FmtTime(ns int64) string {
	if ns == 0 {
		return "the start"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339)
}
