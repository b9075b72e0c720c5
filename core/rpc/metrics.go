package rpc

// query_metrics is answered by this Machine's metrics plugin; ployzd
// serves it only while a healthy plugin advertises CapQueryMetrics
// (sdk/observe), else refuses it with details.capability.
const (
	CmdQueryMetrics = "query_metrics"
	CapQueryMetrics = "ployz.metrics.query.v1"
)

// QueryMetricsRequest selects series on one Machine: the Machine itself,
// Containers (by name or id prefix), or a Service or Deployment (the sum
// of its Containers); with none of them, every Container separately.
type QueryMetricsRequest struct {
	Machine    bool     `json:"machine,omitempty"`
	Namespace  string   `json:"namespace,omitempty"`
	Service    string   `json:"service,omitempty"`
	Deployment string   `json:"deployment,omitempty"`
	Container  string   `json:"container,omitempty"`
	Metrics    []string `json:"metrics,omitempty"` // e.g. cpu.cores; empty: all
	Since      int64    `json:"since_unix_nano,omitempty"`
	Until      int64    `json:"until_unix_nano,omitempty"`
	// StepSeconds asks for a resolution: under 300 reads the 10 s samples
	// (last 24 h only), else the 5-minute Rollups.
	StepSeconds int `json:"step_seconds,omitempty"`
}

// MetricSubject is whose values a series holds.
type MetricSubject struct {
	Machine       bool   `json:"machine,omitempty"`
	ContainerID   string `json:"container_id,omitempty"`
	ContainerName string `json:"container_name,omitempty"`
	Namespace     string `json:"namespace,omitempty"`
	Service       string `json:"service,omitempty"`
	Deployment    string `json:"deployment,omitempty"`
}

// MetricPoint is one value; a Rollup's Value is its average and Min, Max
// and Last are set.
type MetricPoint struct {
	Time  int64    `json:"time_unix_nano"`
	Value float64  `json:"value"`
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
	Last  *float64 `json:"last,omitempty"`
}

// MetricSeries is one metric of one subject.
type MetricSeries struct {
	Metric  string        `json:"metric"`
	Subject MetricSubject `json:"subject"`
	Points  []MetricPoint `json:"points"`
}

// MetricGap is a range where a value could not be read, and why; no
// Subject means the whole Machine (metric "*": nothing was sampled).
type MetricGap struct {
	Metric  string         `json:"metric"`
	Subject *MetricSubject `json:"subject,omitempty"`
	From    int64          `json:"from_unix_nano"`
	To      int64          `json:"to_unix_nano"`
	Reason  string         `json:"reason"`
}

// MetricsAnswer is query_metrics' payload.
type MetricsAnswer struct {
	MachineID         string         `json:"machine_id"`
	Series            []MetricSeries `json:"series"`
	Gaps              []MetricGap    `json:"gaps,omitempty"`
	ResolutionSeconds int            `json:"resolution_seconds"`
	Markers           []MetricMarker `json:"markers,omitempty"`
}

// MetricMarker is a lifecycle event on the metrics timeline: kind
// "start", "stop", "oom_kill", "restart" or "deploy".
type MetricMarker struct {
	Time    int64         `json:"time_unix_nano"`
	Subject MetricSubject `json:"subject"`
	Kind    string        `json:"kind"`
	Detail  string        `json:"detail,omitempty"`
}
