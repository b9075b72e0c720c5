package metrics

import (
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/ployz/ployz/sdk/observe"
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

// MetricJobRuns is ployzd's count (observe.Counters) of the scheduled
// job runs this Machine recorded an outcome for, served as
// ployz_job_runs_total{namespace,service,status} (a counter, reset when
// ployzd restarts), ployz_job_last_run_status{namespace,service,status}
// (1 on the last run's status) and
// ployz_job_last_success_timestamp_seconds{namespace,service}.
const MetricJobRuns = "job.runs"

// MetricVolumeSnapshots is ployzd's count (observe.Counters) of the
// automatic snapshots (x-volume) of the volumes whose Writer is on this
// Machine, served as ployz_volume_snapshots_total{volume,result} (taken,
// pruned, failed; reset when ployzd restarts),
// ployz_volume_last_snapshot_timestamp_seconds{volume} and
// ployz_volume_mirror_last_sync_timestamp_seconds{volume,mirror} and
// ployz_volume_mirror_lag_seconds{volume,mirror} (the sample's time minus
// the last sync).
const MetricVolumeSnapshots = "volume.snapshots"

// addCounters adds the tick's counters from ployzd, or their gap.
func addCounters(fams map[string]*dto.MetricFamily, gauge func(name, help string) *dto.MetricFamily, t Tick) {
	machine := &dto.LabelPair{Name: proto.String("scope"), Value: proto.String("machine")}
	if t.CountersGap != "" {
		f := gauge("ployz_metric_gap", gapHelp)
		for _, m := range []string{MetricJobRuns, MetricStoreEventsDropped, MetricVolumeSnapshots} {
			f.Metric = append(f.Metric, &dto.Metric{Label: []*dto.LabelPair{
				{Name: proto.String("metric"), Value: proto.String(m)},
				{Name: proto.String("reason"), Value: proto.String(t.CountersGap)}, machine,
			}, Gauge: &dto.Gauge{Value: proto.Float64(1)}})
		}
		return
	}
	addJobRuns(fams, gauge, t.Counters.JobRuns)
	addVolumeProtection(fams, gauge, t.Counters.VolumeProtection, t.Time)
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

// addJobRuns adds the job run families; a Machine that recorded no run
// since ployzd started serves none.
func addJobRuns(fams map[string]*dto.MetricFamily, gauge func(name, help string) *dto.MetricFamily, jobs []observe.JobRuns) {
	if len(jobs) == 0 {
		return
	}
	total := counterFamily(MetricJobRuns, "Scheduled job runs this Machine recorded an outcome for, by final status, since ployzd started.")
	last := gauge("ployz_job_last_run_status", "1 on the status of the last run of the job this Machine recorded (skipped ticks aside).")
	success := gauge("ployz_job_last_success_timestamp_seconds", "When the last successful run of the job on this Machine ended, in unix seconds.")
	for _, j := range jobs {
		ns, svc := label("namespace", j.Namespace), label("service", j.Service)
		for _, status := range slices.Sorted(maps.Keys(j.ByStatus)) {
			total.Metric = append(total.Metric, &dto.Metric{Label: []*dto.LabelPair{ns, label("scope", "machine"), svc, label("status", status)},
				Counter: &dto.Counter{Value: proto.Float64(float64(j.ByStatus[status]))}})
		}
		if j.LastStatus != "" {
			last.Metric = append(last.Metric, &dto.Metric{Label: []*dto.LabelPair{ns, label("scope", "machine"), svc, label("status", j.LastStatus)},
				Gauge: &dto.Gauge{Value: proto.Float64(1)}})
		}
		if j.LastSuccess > 0 {
			success.Metric = append(success.Metric, &dto.Metric{Label: []*dto.LabelPair{ns, label("scope", "machine"), svc},
				Gauge: &dto.Gauge{Value: proto.Float64(float64(j.LastSuccess) / 1000)}})
		}
	}
	fams[total.GetName()] = total
	dropEmpty(fams, last, success)
}

// addVolumeProtection adds the volume protection families; a Machine
// holding no protected Writer serves none.
func addVolumeProtection(fams map[string]*dto.MetricFamily, gauge func(name, help string) *dto.MetricFamily, vols []observe.VolumeProtection, at time.Time) {
	if len(vols) == 0 {
		return
	}
	total := counterFamily(MetricVolumeSnapshots, "Automatic snapshots (x-volume) of the volumes whose Writer is on this Machine, by result, since ployzd started.")
	last := gauge("ployz_volume_last_snapshot_timestamp_seconds", "When the newest automatic snapshot of the volume was taken, in unix seconds.")
	synced := gauge("ployz_volume_mirror_last_sync_timestamp_seconds", "When the newest Volume Run whose stream landed on the Mirror started, in unix seconds.")
	lag := gauge("ployz_volume_mirror_lag_seconds", "How far the Mirror is behind the Writer at the last sample, in seconds: the sample's time minus its last sync (an upper bound).")
	for _, v := range vols {
		vol := label("volume", v.Volume)
		for _, result := range slices.Sorted(maps.Keys(v.Snapshots)) {
			total.Metric = append(total.Metric, &dto.Metric{Label: []*dto.LabelPair{label("result", result), label("scope", "machine"), vol},
				Counter: &dto.Counter{Value: proto.Float64(float64(v.Snapshots[result]))}})
		}
		if v.LastSnapshot > 0 {
			last.Metric = append(last.Metric, &dto.Metric{Label: []*dto.LabelPair{label("scope", "machine"), vol},
				Gauge: &dto.Gauge{Value: proto.Float64(float64(v.LastSnapshot) / 1000)}})
		}
		for _, m := range v.Mirrors {
			synced.Metric = append(synced.Metric, &dto.Metric{Label: []*dto.LabelPair{label("mirror", m.Machine), label("scope", "machine"), vol},
				Gauge: &dto.Gauge{Value: proto.Float64(float64(m.LastSync) / 1000)}})
			// The lag as `ployz volume inspect` says it, for an alert
			// that needs no time() arithmetic; a sync dated after the
			// sample (clock skew) is 0 behind, as inspect says.
			if at.IsZero() {
				continue
			}
			lag.Metric = append(lag.Metric, &dto.Metric{Label: []*dto.LabelPair{label("mirror", m.Machine), label("scope", "machine"), vol},
				Gauge: &dto.Gauge{Value: proto.Float64(max(float64(at.UnixMilli()-m.LastSync)/1000, 0))}})
		}
	}
	fams[total.GetName()] = total
	dropEmpty(fams, total, last, synced, lag)
}

// label is one Prometheus label.
func label(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: proto.String(name), Value: proto.String(value)}
}

// counterFamily is the counter family <metric>_total.
func counterFamily(metric, help string) *dto.MetricFamily {
	return &dto.MetricFamily{Name: proto.String(promName(metric) + "_total"), Type: dto.MetricType_COUNTER.Enum(), Help: proto.String(help)}
}

// dropEmpty removes the families fs that hold no metric: a family with
// none would be served as a bare HELP and TYPE.
func dropEmpty(fams map[string]*dto.MetricFamily, fs ...*dto.MetricFamily) {
	for _, f := range fs {
		if len(f.Metric) == 0 {
			delete(fams, f.GetName())
		}
	}
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
