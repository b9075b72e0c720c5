package observe

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// MachineMetrics is one Machine's query_metrics answer, or why there is
// none.
type MachineMetrics struct {
	Machine string             `json:"machine"`
	Answer  *rpc.MetricsAnswer `json:"answer,omitempty"`
	Error   string             `json:"error,omitempty"`
}

// Metrics asks the Machines t names the same query_metrics; every Machine
// appears in the answer, with its error when it has none. Sorted by name.
func Metrics(ctx context.Context, c Caller, t rpc.Target, req rpc.QueryMetricsRequest) ([]MachineMetrics, error) {
	answers, err := rpc.InvokeAll(ctx, c, t, rpc.QueryMetrics, req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	var out []MachineMetrics
	for _, a := range answers {
		if a.Err != nil && a.Err.Details["capability"] != nil {
			a.Error += " (its metrics plugin is not serving; see `ployz machine inspect`)"
		}
		out = append(out, MachineMetrics{Machine: a.Machine, Answer: a.Value, Error: a.Error})
	}
	return out, nil
}

// Failed lists the Machines of ms that did not answer.
func Failed(ms []MachineMetrics) []Failure {
	var out []Failure
	for _, m := range ms {
		if m.Error != "" {
			out = append(out, Failure{Machine: m.Machine, Error: m.Error})
		}
	}
	return out
}

// TopRow is one Container in `ployz top`: its latest CPU and memory (nil
// when its sample named a gap).
type TopRow struct {
	Machine   string   `json:"machine"`
	Container string   `json:"container"`
	Namespace string   `json:"namespace"`
	Service   string   `json:"service"`
	CPU       *float64 `json:"cpu_cores,omitempty"`
	Memory    *float64 `json:"memory_bytes,omitempty"`
}

// TopQuery is the query_metrics request of one `ployz top` refresh.
func TopQuery(now time.Time) rpc.QueryMetricsRequest {
	return rpc.QueryMetricsRequest{Metrics: []string{"cpu.cores", "mem.bytes"}, Since: now.Add(-30 * time.Second).UnixNano()}
}

// Top asks the Machines t names for every Container's latest CPU and
// memory: the rows busiest first, and each Machine's answer (the failed
// ones name why).
func Top(ctx context.Context, c Caller, t rpc.Target) ([]TopRow, []MachineMetrics, error) {
	ms, err := Metrics(ctx, c, t, TopQuery(time.Now()))
	if err != nil {
		return nil, nil, err
	}
	return TopRows(ms), ms, nil
}

// TopRows takes each Container's last value per metric, busiest first.
func TopRows(ms []MachineMetrics) []TopRow {
	byKey := map[string]*TopRow{}
	var rows []*TopRow
	for _, m := range ms {
		if m.Answer == nil {
			continue
		}
		for _, s := range m.Answer.Series {
			if s.Subject.ContainerID == "" || len(s.Points) == 0 {
				continue
			}
			k := m.Machine + "/" + s.Subject.ContainerID
			r := byKey[k]
			if r == nil {
				r = &TopRow{Machine: m.Machine, Container: s.Subject.ContainerName, Namespace: s.Subject.Namespace, Service: s.Subject.Service}
				byKey[k] = r
				rows = append(rows, r)
			}
			v := s.Points[len(s.Points)-1].Value
			switch s.Metric {
			case "cpu.cores":
				r.CPU = &v
			case "mem.bytes":
				r.Memory = &v
			}
		}
	}
	out := make([]TopRow, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	cpu := func(r TopRow) float64 {
		if r.CPU == nil {
			return -1
		}
		return *r.CPU
	}
	sort.SliceStable(out, func(i, j int) bool { return cpu(out[i]) > cpu(out[j]) })
	return out
}
