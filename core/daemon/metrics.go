package daemon

import (
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"reflect"
	"time"

	"google.golang.org/grpc"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/observe"
	metricsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/metrics/v1"
	"github.com/ployz/ployz/sdk/store"
)

// MetricsPlugin is the metrics plugin's name; MetricsPort is where it
// serves Prometheus' text format on the Machine's mesh address.
const (
	MetricsPlugin = "metrics"
	MetricsPort   = 9101
)

// metricsPlugin hands the metrics plugin its spec: this Machine's id and
// the Prometheus endpoint on its mesh address.
func (d *Daemon) metricsPlugin() servingPlugin {
	return servingPlugin{name: MetricsPlugin, what: "metrics", spec: d.metricsSpec,
		check: func(b []byte) error { _, err := observe.ParseSpec(b); return err },
		kept:  []string{metricsSpecFile, d.countersPath()}}
}

// countersName is the file in RunDir ployzd keeps its observe.Counters in
// for the metrics plugin.
const countersName = "counters.json"

func (d *Daemon) countersPath() string { return filepath.Join(d.cfg.RunDir, countersName) }

// countersEvery is how often the counters file is brought up to date: the
// metrics plugin's own tick.
const countersEvery = 10 * time.Second

func (d *Daemon) metricsLoop(ctx context.Context) {
	go d.countersLoop(ctx)
	d.keepConfigured(ctx, d.metricsPlugin())
}

// countersLoop rewrites the counters file whenever the counts change,
// and once at the start: a file left by the previous ployzd holds counts
// of processes since gone.
func (d *Daemon) countersLoop(ctx context.Context) {
	var last *observe.Counters
	for {
		c := countersOf(store.DroppedEvents(), d.pluginStatus())
		c.JobRuns = d.jobOutcomes.Snapshot()
		c.VolumeProtection = d.volumes().ProtectOutcomes().Snapshot()
		if last == nil || !reflect.DeepEqual(c, *last) {
			if err := observe.WriteCounters(d.countersPath(), c); err != nil {
				d.log.Warn("counters for the metrics plugin not written; retrying", "error", err)
			} else {
				last = &c
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(countersEvery):
		}
	}
}

func (d *Daemon) pluginStatus() []pluginhost.PluginStatus {
	if d.plugins == nil {
		return nil
	}
	return d.plugins.Status()
}

// countersOf is what the counters file says of dropped store events:
// this daemon's and each plugin process's own, as its Info last reported
// them. The job run outcomes are added beside them (countersLoop).
func countersOf(own map[string]int64, plugins []pluginhost.PluginStatus) observe.Counters {
	var c observe.Counters
	add := func(process string, n map[string]int64) {
		if len(n) == 0 {
			return
		}
		if c.StoreEventsDropped == nil {
			c.StoreEventsDropped = map[string]map[string]int64{}
		}
		c.StoreEventsDropped[process] = n
	}
	add(observe.DaemonProcess, own)
	for _, p := range plugins {
		add(p.Name, p.StoreEventsDropped)
	}
	return c
}

// stopMetrics is the reset path: the spec names this Machine's id and its
// mesh address, both gone; the plugin the host starts again collects on
// the defaults (no Prometheus endpoint) until the Machine joins anew.
func (d *Daemon) stopMetrics(ctx context.Context) { d.stopServing(ctx, d.metricsPlugin()) }

func (d *Daemon) metricsSpec() ([]byte, error) {
	k, err := d.publicKey()
	if err != nil {
		return nil, err
	}
	rec := d.record()
	spec := observe.Spec{MachineID: rec.ID, Budget: observe.BudgetFromLabels(rec.Labels),
		MetricsListen: netip.AddrPortFrom(meshaddr.ManagementIP(k), MetricsPort).String(), CountersFile: d.countersPath()}
	return json.Marshal(spec)
}

// LogStorePlugin is the logstore plugin's name.
const LogStorePlugin = "logstore"

// logStorePlugin hands the logstore its spec: the Observe Store's budget
// from the Machine's label (observe.BudgetLabel), so an operator sets it
// with `ployz machine update --observe-budget` instead of editing the
// plugin's file on the Machine. Without the label the spec is the
// defaults. The logstore is not withdrawn on reset: its spec names
// nothing of the Cluster, and its lines stay readable on the Machine.
func (d *Daemon) logStorePlugin() servingPlugin {
	return servingPlugin{name: LogStorePlugin, what: "logstore", spec: d.logStoreSpec,
		check: func(b []byte) error { _, err := observe.ParseSpec(b); return err }}
}

func (d *Daemon) logStoreLoop(ctx context.Context) { d.keepConfigured(ctx, d.logStorePlugin()) }

func (d *Daemon) logStoreSpec() ([]byte, error) {
	rec := d.record()
	return json.Marshal(observe.Spec{MachineID: rec.ID, Budget: observe.BudgetFromLabels(rec.Labels)})
}

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

// metricsRoutes forward query_metrics to the metrics plugin.
func (d *Daemon) metricsRoutes() {
	r := rpc.Bind(rpc.QueryMetrics, d.queryMetrics)
	r.Available = func() bool { return d.plugins != nil && d.plugins.Available(observe.CapQueryMetrics) }
	d.rpc.Handle(r)
}

func (d *Daemon) queryMetrics(ctx context.Context, req rpc.QueryMetricsRequest) (rpc.MetricsAnswer, error) {
	switch {
	case req.Since < 0:
		return rpc.MetricsAnswer{}, rpc.InvalidField("since_unix_nano", "%d is negative", req.Since)
	case req.Until != 0 && req.Until < req.Since:
		return rpc.MetricsAnswer{}, rpc.InvalidField("until_unix_nano", "%d is before since_unix_nano %d", req.Until, req.Since)
	case req.StepSeconds < 0:
		return rpc.MetricsAnswer{}, rpc.InvalidField("step_seconds", "%d is negative", req.StepSeconds)
	}
	if d.plugins == nil {
		return rpc.MetricsAnswer{}, rpc.Errorf(rpc.CodeUnavailable, "no plugin host").With("capability", observe.CapQueryMetrics)
	}
	out := rpc.MetricsAnswer{MachineID: d.record().ID, Series: []rpc.MetricSeries{}}
	err := d.plugins.Call(ctx, observe.CapQueryMetrics, func(ctx context.Context, conn *grpc.ClientConn) error {
		resp, err := metricsv1.NewMetricsClient(conn).QueryMetrics(ctx, &metricsv1.QueryMetricsRequest{
			Selector: &metricsv1.Selector{Machine: req.Machine, Namespace: req.Namespace, Service: req.Service,
				Deployment: req.Deployment, ContainerId: req.Container},
			Metrics: req.Metrics, FromUnixNanos: req.Since, ToUnixNanos: req.Until, StepSeconds: uint32(req.StepSeconds)})
		if err != nil {
			return err
		}
		out.ResolutionSeconds = int(resp.GetResolutionSeconds())
		for _, s := range resp.GetSeries() {
			ms := rpc.MetricSeries{Metric: s.GetMetric(), Subject: metricSubject(s.GetSubject()), Points: make([]rpc.MetricPoint, 0, len(s.GetPoints()))}
			rollup := resp.GetResolutionSeconds() >= 300
			for _, p := range s.GetPoints() {
				mp := rpc.MetricPoint{Time: p.GetTimeUnixNanos(), Value: p.GetValue()}
				if rollup {
					mn, mx, last := p.GetMin(), p.GetMax(), p.GetLast()
					mp.Min, mp.Max, mp.Last = &mn, &mx, &last
				}
				ms.Points = append(ms.Points, mp)
			}
			out.Series = append(out.Series, ms)
		}
		for _, g := range resp.GetGaps() {
			mg := rpc.MetricGap{Metric: g.GetMetric(), From: g.GetFromUnixNanos(), To: g.GetToUnixNanos(), Reason: g.GetReason()}
			if g.GetSubject() != nil {
				sub := metricSubject(g.GetSubject())
				mg.Subject = &sub
			}
			out.Gaps = append(out.Gaps, mg)
		}
		for _, m := range resp.GetMarkers() {
			out.Markers = append(out.Markers, rpc.MetricMarker{Time: m.GetTimeUnixNanos(), Subject: metricSubject(m.GetSubject()),
				Kind: m.GetKind(), Detail: m.GetDetail()})
		}
		return nil
	})
	if err != nil {
		return rpc.MetricsAnswer{}, pluginErr(err, observe.CapQueryMetrics)
	}
	return out, nil
}

func metricSubject(s *metricsv1.Selector) rpc.MetricSubject {
	return rpc.MetricSubject{Machine: s.GetMachine(), ContainerID: s.GetContainerId(), ContainerName: s.GetContainerName(),
		Namespace: s.GetNamespace(), Service: s.GetService(), Deployment: s.GetDeployment()}
}
