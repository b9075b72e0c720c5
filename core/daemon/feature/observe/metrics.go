package observe

import (
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"reflect"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	sdkobserve "github.com/ployz/ployz/sdk/observe"
	metricsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/metrics/v1"
	"github.com/ployz/ployz/sdk/store"
	"google.golang.org/grpc"
)

// CountersName is the file in RunDir ployzd keeps its sdkobserve.Counters in
// for the metrics plugin.
const CountersName = "counters.json"

// CountersPath is the counters file the metrics plugin reads.
func (f *Feature) CountersPath() string { return filepath.Join(f.host.RunDir(), CountersName) }

// countersEvery is how often the counters file is brought up to date: the
// metrics plugin's own tick.
const countersEvery = 10 * time.Second

// CountersLoop rewrites the counters file whenever the counts change,
// and once at the start: a file left by the previous ployzd holds counts
// of processes since gone.
func (f *Feature) CountersLoop(ctx context.Context) {
	var last *sdkobserve.Counters
	for {
		c := countersOf(store.DroppedEvents(), f.host.PluginStatus())
		c.JobRuns, c.VolumeProtection = f.host.JobRuns(), f.host.VolumeProtection()
		if last == nil || !reflect.DeepEqual(c, *last) {
			if err := sdkobserve.WriteCounters(f.CountersPath(), c); err != nil {
				f.log.Warn("counters for the metrics plugin not written; retrying", "error", err)
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

// countersOf is what the counters file says of dropped store events:
// this daemon's and each plugin process's own, as its Info last reported
// them. The job run outcomes are added beside them (countersLoop).
func countersOf(own map[string]int64, plugins []pluginhost.PluginStatus) sdkobserve.Counters {
	var c sdkobserve.Counters
	add := func(process string, n map[string]int64) {
		if len(n) == 0 {
			return
		}
		if c.StoreEventsDropped == nil {
			c.StoreEventsDropped = map[string]map[string]int64{}
		}
		c.StoreEventsDropped[process] = n
	}
	add(sdkobserve.DaemonProcess, own)
	for _, p := range plugins {
		add(p.Name, p.StoreEventsDropped)
	}
	return c
}

// MetricsSpec is the metrics plugin's spec: this Machine's id and the
// Prometheus endpoint on its mesh address.
func (f *Feature) MetricsSpec() ([]byte, error) {
	ip, err := f.host.ManagementIP()
	if err != nil {
		return nil, err
	}
	rec := f.host.Machine()
	spec := sdkobserve.Spec{MachineID: rec.ID, Budget: sdkobserve.BudgetFromLabels(rec.Labels),
		MetricsListen: netip.AddrPortFrom(ip, MetricsPort).String(), CountersFile: f.CountersPath()}
	return json.Marshal(spec)
}

// LogStoreSpec is the logstore's spec: the Observe Store's budget from
// the Machine's label.
func (f *Feature) LogStoreSpec() ([]byte, error) {
	rec := f.host.Machine()
	return json.Marshal(sdkobserve.Spec{MachineID: rec.ID, Budget: sdkobserve.BudgetFromLabels(rec.Labels)})
}

// metricsRoute forwards query_metrics to the metrics plugin.
func (f *Feature) metricsRoute() rpc.Route {
	r := rpc.Bind(rpc.QueryMetrics, f.queryMetrics)
	r.Available = func() bool { return f.available(sdkobserve.CapQueryMetrics) }
	return r
}

func (f *Feature) queryMetrics(ctx context.Context, req rpc.QueryMetricsRequest) (rpc.MetricsAnswer, error) {
	switch {
	case req.Since < 0:
		return rpc.MetricsAnswer{}, rpc.InvalidField("since_unix_nano", "%d is negative", req.Since)
	case req.Until != 0 && req.Until < req.Since:
		return rpc.MetricsAnswer{}, rpc.InvalidField("until_unix_nano", "%d is before since_unix_nano %d", req.Until, req.Since)
	case req.StepSeconds < 0:
		return rpc.MetricsAnswer{}, rpc.InvalidField("step_seconds", "%d is negative", req.StepSeconds)
	}
	if f.host.Plugins() == nil {
		return rpc.MetricsAnswer{}, rpc.Errorf(rpc.CodeUnavailable, "no plugin host").With("capability", sdkobserve.CapQueryMetrics)
	}
	out := rpc.MetricsAnswer{MachineID: f.host.Machine().ID, Series: []rpc.MetricSeries{}}
	err := f.host.Plugins().Call(ctx, sdkobserve.CapQueryMetrics, func(ctx context.Context, conn *grpc.ClientConn) error {
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
		return rpc.MetricsAnswer{}, feature.PluginErr(err, sdkobserve.CapQueryMetrics)
	}
	return out, nil
}

func metricSubject(s *metricsv1.Selector) rpc.MetricSubject {
	return rpc.MetricSubject{Machine: s.GetMachine(), ContainerID: s.GetContainerId(), ContainerName: s.GetContainerName(),
		Namespace: s.GetNamespace(), Service: s.GetService(), Deployment: s.GetDeployment()}
}
