package daemon

import (
	"context"

	obsfeature "github.com/ployz/ployz/core/daemon/feature/observe"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/sdk/observe"
)

// MetricsPlugin is the metrics plugin's name; MetricsPort is where it
// serves Prometheus' text format on the Machine's mesh address.
const (
	MetricsPlugin = "metrics"
	MetricsPort   = obsfeature.MetricsPort
)

// metricsPlugin hands the metrics plugin its spec: this Machine's id and
// the Prometheus endpoint on its mesh address.
func (d *Daemon) metricsPlugin() servingPlugin {
	return servingPlugin{name: MetricsPlugin, what: "metrics", spec: d.obs().MetricsSpec,
		check: func(b []byte) error { _, err := observe.ParseSpec(b); return err },
		kept:  []string{metricsSpecFile, d.obs().CountersPath()}}
}

// metricsLoop keeps the metrics plugin configured and the counters file
// it reads current.
func (d *Daemon) metricsLoop(ctx context.Context) {
	go d.obs().CountersLoop(ctx)
	d.keepConfigured(ctx, d.metricsPlugin())
}

// stopMetrics is the reset path: the spec names this Machine's id and its
// mesh address, both gone; the plugin the host starts again collects on
// the defaults (no Prometheus endpoint) until the Machine joins anew.
func (d *Daemon) stopMetrics(ctx context.Context) { d.stopServing(ctx, d.metricsPlugin()) }

// LogStorePlugin is the logstore plugin's name.
const LogStorePlugin = "logstore"

// logStorePlugin hands the logstore its spec: the Observe Store's budget
// from the Machine's label (observe.BudgetLabel), so an operator sets it
// with `ployz machine update --observe-budget` instead of editing the
// plugin's file on the Machine. Without the label the spec is the
// defaults. The logstore is not withdrawn on reset: its spec names
// nothing of the Cluster, and its lines stay readable on the Machine.
func (d *Daemon) logStorePlugin() servingPlugin {
	return servingPlugin{name: LogStorePlugin, what: "logstore", spec: d.obs().LogStoreSpec,
		check: func(b []byte) error { _, err := observe.ParseSpec(b); return err }}
}

func (d *Daemon) logStoreLoop(ctx context.Context) { d.keepConfigured(ctx, d.logStorePlugin()) }

// applyBudget hands both Observe Store plugins a budget label's change at
// once instead of at their next refresh (servingRefreshEvery); a failure
// is left to that refresh.
func (d *Daemon) applyBudget(ctx context.Context) {
	if d.record().Phase != machine.Participating {
		return
	}
	for _, p := range []servingPlugin{d.logStorePlugin(), d.metricsPlugin()} {
		if err := d.configure(ctx, p); err != nil {
			d.log.Warn("observe budget not applied yet; the next refresh retries", "plugin", p.name, "error", err)
		}
	}
}

// obs is the Observe Store feature (feature/observe); it keeps no state
// of its own.
func (d *Daemon) obs() *obsfeature.Feature { return obsfeature.New(featureHost{d}, d.log) }
