package daemon

import (
	obsfeature "github.com/ployz/ployz/core/daemon/feature/observe"
	servingfeature "github.com/ployz/ployz/core/daemon/feature/serving"

	"github.com/ployz/ployz/sdk/observe"
)

// MetricsPlugin is the metrics plugin's name; MetricsPort is where it
// serves Prometheus' text format on the Machine's mesh address.
const (
	MetricsPlugin = "metrics"
	MetricsPort   = obsfeature.MetricsPort
)

// metricsPlugin hands the metrics plugin its spec: this Machine's id and
// the Prometheus endpoint on its mesh address. On reset it is stopped:
// the spec names this Machine's id and its mesh address, both gone; the
// plugin the host starts again collects on the defaults (no Prometheus
// endpoint) until the Machine joins anew.
func metricsPlugin(o *obsfeature.Feature) servingfeature.Plugin {
	return servingfeature.Plugin{Name: MetricsPlugin, What: "metrics", Spec: o.MetricsSpec,
		Check: func(b []byte) error { _, err := observe.ParseSpec(b); return err },
		Kept:  []string{metricsSpecFile, o.CountersPath()}}
}

// LogStorePlugin is the logstore plugin's name.
const LogStorePlugin = "logstore"

// logStorePlugin hands the logstore its spec: the Observe Store's budget
// from the Machine's label (observe.BudgetLabel), so an operator sets it
// with `ployz machine update --observe-budget` instead of editing the
// plugin's file on the Machine. Without the label the spec is the
// defaults. The logstore is not withdrawn on reset: its spec names
// nothing of the Cluster, and its lines stay readable on the Machine.
func logStorePlugin(o *obsfeature.Feature) servingfeature.Plugin {
	return servingfeature.Plugin{Name: LogStorePlugin, What: "logstore", Spec: o.LogStoreSpec,
		Check: func(b []byte) error { _, err := observe.ParseSpec(b); return err }}
}

// obs is the Observe Store feature (feature/observe); it keeps no state
// of its own.
func (d *Daemon) obs() *obsfeature.Feature { return obsfeature.New(featureHost{d}, d.log) }
