package dashboard

import (
	"net/http"
	"sort"
	"time"
)

// chartRange is one of the chart ranges the Service page offers.
type chartRange struct {
	span time.Duration
	step int // seconds per point drawn (about 720 points a chart)
}

var chartRanges = map[string]chartRange{
	"1h":  {time.Hour, 10},
	"24h": {24 * time.Hour, 120},
	"90d": {90 * 24 * time.Hour, 3 * 3600},
}

// Charts is a metrics answer shaped for uPlot: one time axis per chart,
// one series per Machine, null where nothing was read, so a gap is drawn
// as a gap and never as zero; Gaps name why.
type Charts struct {
	Range   string        `json:"range"`
	From    int64         `json:"from"` // unix seconds
	To      int64         `json:"to"`
	Step    int           `json:"step"`
	Charts  []Chart       `json:"charts"`
	Gaps    []NamedGap    `json:"gaps,omitempty"`
	Markers []ChartMarker `json:"markers,omitempty"`
}

// Chart is one metric.
type Chart struct {
	Metric string        `json:"metric"`
	Times  []int64       `json:"times"`
	Series []ChartSeries `json:"series"`
}

// ChartSeries is one Machine's values; nil is no value.
type ChartSeries struct {
	Machine string     `json:"machine"`
	Values  []*float64 `json:"values"`
}

// NamedGap is a range a Machine could not read a metric ("*": any), and why.
type NamedGap struct {
	Machine string `json:"machine"`
	Metric  string `json:"metric"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Reason  string `json:"reason"`
}

// ChartMarker is a deploy, restart, start, stop or OOM kill.
type ChartMarker struct {
	Time    int64  `json:"time"`
	Machine string `json:"machine"`
	Kind    string `json:"kind"`
	Detail  string `json:"detail,omitempty"`
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("range")
	if name == "" {
		name = "1h"
	}
	cr, ok := chartRanges[name]
	if !ok {
		writeError(w, &FieldError{Field: "range", Msg: "want 1h, 24h or 90d, got " + name})
		return
	}
	if q.Get("service") != "" && q.Get("namespace") == "" {
		writeError(w, &FieldError{Field: "namespace", Msg: "required with service"})
		return
	}
	now := time.Now()
	mq := MetricsQuery{Namespace: q.Get("namespace"), Service: q.Get("service"), Since: now.Add(-cr.span), Until: now}
	ms, err := s.src.Metrics(r.Context(), mq)
	if err != nil {
		writeError(w, err)
		return
	}
	c := BuildCharts(ms, mq.Since, now, cr.step)
	c.Range = name
	writeJSON(w, http.StatusOK, c)
}

// BuildCharts buckets every Machine's series onto one axis of step
// seconds over [from, to]. A bucket with no sample, or inside a named gap,
// is nil; a Machine that did not answer is nil throughout and named.
func BuildCharts(ms []MachineMetrics, from, to time.Time, step int) Charts {
	f, t := from.Unix()/int64(step)*int64(step), to.Unix()
	n := int((t-f)/int64(step)) + 1
	out := Charts{From: f, To: t, Step: step}
	times := make([]int64, n)
	for i := range times {
		times[i] = f + int64(i*step)
	}
	// metric -> machine -> bucket -> timestamp -> summed value (a Service's
	// subjects on one Machine add up, as `ployz metrics` sums them).
	sums := map[string]map[string]map[int]map[int64]float64{}
	var machines []string
	for _, m := range ms {
		machines = append(machines, m.Machine)
		if m.Answer == nil {
			out.Gaps = append(out.Gaps, NamedGap{Machine: m.Machine, Metric: "*", From: f, To: t, Reason: "no answer: " + m.Error})
			continue
		}
		for _, sr := range m.Answer.Series {
			for _, p := range sr.Points {
				b := int((p.Time/1e9 - f) / int64(step))
				if b < 0 || b >= n {
					continue
				}
				bucketOf(sums, sr.Metric, m.Machine, b)[p.Time] += p.Value
			}
		}
		for _, g := range m.Answer.Gaps {
			out.Gaps = append(out.Gaps, NamedGap{Machine: m.Machine, Metric: g.Metric, From: g.From / 1e9, To: g.To / 1e9, Reason: g.Reason})
		}
		for _, mk := range m.Answer.Markers {
			out.Markers = append(out.Markers, ChartMarker{Time: mk.Time / 1e9, Machine: m.Machine, Kind: mk.Kind, Detail: mk.Detail})
		}
	}
	var metrics []string
	for k := range sums {
		metrics = append(metrics, k)
	}
	sort.Strings(metrics)
	for _, metric := range metrics {
		c := Chart{Metric: metric, Times: times}
		for _, machine := range machines {
			c.Series = append(c.Series, ChartSeries{Machine: machine, Values: seriesValues(sums[metric][machine], n, out.Gaps, machine, metric, f, step)})
		}
		out.Charts = append(out.Charts, c)
	}
	sort.Slice(out.Markers, func(i, j int) bool { return out.Markers[i].Time < out.Markers[j].Time })
	return out
}

func bucketOf(sums map[string]map[string]map[int]map[int64]float64, metric, machine string, b int) map[int64]float64 {
	if sums[metric] == nil {
		sums[metric] = map[string]map[int]map[int64]float64{}
	}
	if sums[metric][machine] == nil {
		sums[metric][machine] = map[int]map[int64]float64{}
	}
	if sums[metric][machine][b] == nil {
		sums[metric][machine][b] = map[int64]float64{}
	}
	return sums[metric][machine][b]
}

// seriesValues averages each bucket's samples; a bucket without samples
// or inside one of the Machine's named gaps stays nil.
func seriesValues(buckets map[int]map[int64]float64, n int, gaps []NamedGap, machine, metric string, from int64, step int) []*float64 {
	vals := make([]*float64, n)
	for b, byTime := range buckets {
		var sum float64
		for _, v := range byTime {
			sum += v
		}
		avg := sum / float64(len(byTime))
		vals[b] = &avg
	}
	for _, g := range gaps {
		if g.Machine != machine || g.Metric != metric && g.Metric != "*" {
			continue
		}
		for b := range vals {
			start := from + int64(b*step)
			if start+int64(step) > g.From && start < g.To {
				vals[b] = nil
			}
		}
	}
	return vals
}
