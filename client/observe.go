package client

import (
	"context"
	"fmt"
	"strings"

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
