package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// Metrics asks the Machines t names the same metrics query; Machines that
// did not answer are named in their rows and make a *PartialError beside
// the answers.
func (s *Session) Metrics(ctx context.Context, t rpc.Target, req rpc.QueryMetricsRequest) ([]observe.MachineMetrics, error) {
	ms, err := observe.Metrics(ctx, s.ent, t, req)
	if err != nil {
		return nil, err
	}
	return ms, MetricsPartial(ms)
}

// MetricsPartial is a *PartialError naming the Machines without an
// answer, or nil.
func MetricsPartial(ms []observe.MachineMetrics) error {
	var failed []string
	for _, m := range ms {
		if m.Error != "" {
			failed = append(failed, m.Machine)
		}
	}
	if len(failed) > 0 {
		return partial(fmt.Errorf("metrics are partial: no answer from %s", strings.Join(failed, ", ")))
	}
	return nil
}

// LogHistory asks the Machines t names for their stored lines, merged by
// time; a Machine without a Log Store is named with the capability it
// lacks (observe.History), and any left out makes a *PartialError beside
// the lines.
func (s *Session) LogHistory(ctx context.Context, t rpc.Target, req rpc.LogHistoryRequest) (observe.Logs, error) {
	logs, err := observe.History(ctx, s.ent, t, req)
	if err != nil {
		return logs, err
	}
	if p := logs.Partial(); len(p) > 0 {
		return logs, partial(fmt.Errorf("logs are partial: %s", strings.Join(p, ", ")))
	}
	return logs, nil
}

// ParseWhen reads a since/until value: a duration back from now or an
// RFC 3339 time; empty is 0. An error names the flag field.
func ParseWhen(field, v string, now time.Time) (int64, error) {
	if v == "" {
		return 0, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("--%s %s: a duration back from now must be positive", field, v)
		}
		return now.Add(-d).UnixNano(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: neither a duration (2h) nor an RFC 3339 time", field, v)
	}
	return t.UnixNano(), nil
}

// LogWindow is which stored lines a log read asks for: Since and Until
// as ParseWhen reads them, Tail the last lines (<0: 100 without Since,
// all with it; 0: all).
type LogWindow struct {
	Since, Until string
	Tail         int
}

// Request is log_history's request for q's lines in the window.
func (w LogWindow) Request(q rpc.LogQuery, now time.Time) (rpc.LogHistoryRequest, error) {
	since, err := ParseWhen("since", w.Since, now)
	if err != nil {
		return rpc.LogHistoryRequest{}, err
	}
	until, err := ParseWhen("until", w.Until, now)
	if err != nil {
		return rpc.LogHistoryRequest{}, err
	}
	if until != 0 && until < since {
		return rpc.LogHistoryRequest{}, fmt.Errorf("--until is before --since")
	}
	req := rpc.LogHistoryRequest{LogQuery: q, Since: since, Until: until, Limit: rpc.MaxLogLimit}
	switch tail := w.Tail; {
	case tail > rpc.MaxLogLimit:
		return req, fmt.Errorf("--tail %d exceeds %d", tail, rpc.MaxLogLimit)
	case tail > 0:
		req.Limit, req.Newest = tail, true
	case tail < 0 && w.Since == "":
		req.Limit, req.Newest = 100, true
	}
	return req, nil
}

// MetricsRequest is query_metrics' request for service's metrics in ns
// (each Machine's own when service is ""), only names when given, since
// (ParseWhen) back from now: the 10 s samples up to 24 hours back, the
// 5-minute Rollups further.
func MetricsRequest(ns, service string, names []string, since string, now time.Time) (rpc.QueryMetricsRequest, error) {
	from, err := ParseWhen("since", since, now)
	if err != nil {
		return rpc.QueryMetricsRequest{}, err
	}
	req := rpc.QueryMetricsRequest{Machine: service == "", Metrics: names, Since: from, Namespace: ns, Service: service}
	if now.Sub(time.Unix(0, from)) > 24*time.Hour {
		req.StepSeconds = 300
	}
	return req, nil
}
