package metrics

import (
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// promName turns a metric name into a Prometheus one: cpu.cores ->
// ployz_cpu_cores.
func promName(metric string) string { return "ployz_" + strings.ReplaceAll(metric, ".", "_") }

const gapHelp = "1 for each value the last sample could not read, with the reason."

// WritePrometheus writes the last tick in Prometheus' text format: one
// gauge family per metric, labelled by scope (machine or container) and
// the Container's identity; a value that could not be read is absent
// there and present as ployz_metric_gap{metric,reason} 1.
func WritePrometheus(w io.Writer, t Tick) error {
	fams := map[string]*dto.MetricFamily{}
	family := func(name, help string) *dto.MetricFamily {
		f := fams[name]
		if f == nil {
			f = &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum()}
			fams[name] = f
		}
		return f
	}
	keys := make([]string, 0, len(t.Values))
	for k := range t.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sub := t.Subjects[k]
		labels := []*dto.LabelPair{{Name: proto.String("scope"), Value: proto.String("machine")}}
		if sub.Container != "" {
			labels = []*dto.LabelPair{
				{Name: proto.String("container"), Value: proto.String(sub.Container)},
				{Name: proto.String("container_name"), Value: proto.String(sub.Name)},
				{Name: proto.String("deployment"), Value: proto.String(sub.Deployment)},
				{Name: proto.String("namespace"), Value: proto.String(sub.Namespace)},
				{Name: proto.String("scope"), Value: proto.String("container")},
				{Name: proto.String("service"), Value: proto.String(sub.Service)},
			}
		}
		for _, v := range t.Values[k] {
			if v.Gap != "" {
				f := family("ployz_metric_gap", gapHelp)
				gl := append(append([]*dto.LabelPair{}, labels...),
					&dto.LabelPair{Name: proto.String("metric"), Value: proto.String(v.Metric)},
					&dto.LabelPair{Name: proto.String("reason"), Value: proto.String(v.Gap)})
				sort.Slice(gl, func(i, j int) bool { return gl[i].GetName() < gl[j].GetName() })
				f.Metric = append(f.Metric, &dto.Metric{Label: gl, Gauge: &dto.Gauge{Value: proto.Float64(1)}})
				continue
			}
			f := family(promName(v.Metric), "Ployz metric "+v.Metric+", sampled every 10 s.")
			f.Metric = append(f.Metric, &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: proto.Float64(v.Value)}})
		}
	}
	addCounters(fams, family, t)
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := expfmt.MetricFamilyToText(w, fams[n]); err != nil {
			return err
		}
	}
	return nil
}

// MetricStoreEventsDropped is ployzd's count (observe.Counters) of store
// subscription changes dropped as duplicate or out of order, served as
// ployz_store_events_dropped_total{process,table}: a Prometheus counter,
// reset when the counting process restarts.
const MetricStoreEventsDropped = "store.events_dropped"

// addCounters adds the tick's counters from ployzd, or their gap.
func addCounters(fams map[string]*dto.MetricFamily, gauge func(name, help string) *dto.MetricFamily, t Tick) {
	machine := &dto.LabelPair{Name: proto.String("scope"), Value: proto.String("machine")}
	if t.CountersGap != "" {
		f := gauge("ployz_metric_gap", gapHelp)
		f.Metric = append(f.Metric, &dto.Metric{Label: []*dto.LabelPair{
			{Name: proto.String("metric"), Value: proto.String(MetricStoreEventsDropped)},
			{Name: proto.String("reason"), Value: proto.String(t.CountersGap)}, machine,
		}, Gauge: &dto.Gauge{Value: proto.Float64(1)}})
		return
	}
	if len(t.Counters.StoreEventsDropped) == 0 {
		return
	}
	f := &dto.MetricFamily{Name: proto.String(promName(MetricStoreEventsDropped) + "_total"), Type: dto.MetricType_COUNTER.Enum(),
		Help: proto.String("Store subscription changes a process (ployzd or a plugin) dropped as duplicate or out of order, by table, since it started.")}
	for _, process := range slices.Sorted(maps.Keys(t.Counters.StoreEventsDropped)) {
		byTable := t.Counters.StoreEventsDropped[process]
		for _, table := range slices.Sorted(maps.Keys(byTable)) {
			f.Metric = append(f.Metric, &dto.Metric{Label: []*dto.LabelPair{
				{Name: proto.String("process"), Value: proto.String(process)}, machine,
				{Name: proto.String("table"), Value: proto.String(table)},
			}, Counter: &dto.Counter{Value: proto.Float64(float64(byTable[table]))}})
		}
	}
	fams[f.GetName()] = f
}

// Handler serves /metrics from the Server's last tick.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = WritePrometheus(w, s.lastTick())
	})
	return mux
}
