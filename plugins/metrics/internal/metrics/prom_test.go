package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ployz/ployz/sdk/observe"
)

// countersScrape is a Collector reading the counters file at path (not
// written yet) and a scrape of its endpoint.
func countersScrape(t *testing.T) (path string, scrape func() string) {
	dir := t.TempDir()
	path = filepath.Join(dir, "counters.json")
	c := &Collector{Sys: Sys{Proc: dir, Cgroup: dir, Containers: dir, DiskPath: dir},
		Counters: func() (observe.Counters, error) { return observe.ReadCounters(path) }}
	return path, func() string {
		t.Helper()
		var b strings.Builder
		if err := WritePrometheus(&b, c.Collect(time.Now())); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
}

// TestPrometheusServesDroppedStoreEvents: ployzd's counters file reaches
// the endpoint as one counter per process and table; a file that cannot
// be read is a named gap, never a zero; no file yet serves no counter.
func TestPrometheusServesDroppedStoreEvents(t *testing.T) {
	path, scrape := countersScrape(t)
	if out := scrape(); strings.Contains(out, "store_events_dropped") {
		t.Fatalf("no counters file, yet:\n%s", out)
	}

	if err := observe.WriteCounters(path, observe.Counters{StoreEventsDropped: map[string]map[string]int64{
		observe.DaemonProcess: {"serving": 3, "containers": 1}, "dns": {"serving": 2}}}); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(scrape()))
	if err != nil {
		t.Fatal(err)
	}
	f := fams["ployz_store_events_dropped_total"]
	if f == nil || f.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("family %v, want a counter", f)
	}
	got := map[string]float64{}
	for _, m := range f.GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["scope"] != "machine" {
			t.Errorf("labels %v, want scope machine", l)
		}
		got[l["process"]+"/"+l["table"]] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"ployzd/serving": 3, "ployzd/containers": 1, "dns/serving": 2}
	if len(got) != len(want) {
		t.Fatalf("counters %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}

	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := scrape()
	if strings.Contains(out, "ployz_store_events_dropped_total") ||
		!strings.Contains(out, `ployz_metric_gap{metric="store.events_dropped",reason="counters `) {
		t.Fatalf("a broken counters file, want a named gap:\n%s", out)
	}
}

// TestPrometheusServesJobRuns: ployzd's job run outcomes reach the
// endpoint as a counter per job and status, the last run's status and
// the last success's time; a broken counters file names their gap too.
func TestPrometheusServesJobRuns(t *testing.T) {
	path, scrape := countersScrape(t)
	if out := scrape(); strings.Contains(out, "ployz_job_") {
		t.Fatalf("no counters file, yet:\n%s", out)
	}
	if err := observe.WriteCounters(path, observe.Counters{JobRuns: []observe.JobRuns{
		{Namespace: "shop", Service: "report", ByStatus: map[string]int64{"succeeded": 4, "failed": 1}, LastStatus: "failed", LastSuccess: 1_700_000_000_500},
		{Namespace: "shop", Service: "sweep", ByStatus: map[string]int64{"skipped": 2}},
	}}); err != nil {
		t.Fatal(err)
	}
	out := scrape()
	for _, want := range []string{
		"# TYPE ployz_job_runs_total counter",
		`ployz_job_runs_total{namespace="shop",scope="machine",service="report",status="failed"} 1`,
		`ployz_job_runs_total{namespace="shop",scope="machine",service="report",status="succeeded"} 4`,
		`ployz_job_runs_total{namespace="shop",scope="machine",service="sweep",status="skipped"} 2`,
		`ployz_job_last_run_status{namespace="shop",scope="machine",service="report",status="failed"} 1`,
		`ployz_job_last_success_timestamp_seconds{namespace="shop",scope="machine",service="report"} 1.7000000005e+09`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `service="sweep",status=""`) || strings.Contains(out, `ployz_job_last_success_timestamp_seconds{namespace="shop",scope="machine",service="sweep"}`) {
		t.Errorf("a job with only skipped ticks has no last status or success:\n%s", out)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(out)); err != nil {
		t.Fatalf("scrape does not parse: %v\n%s", err, out)
	}

	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := scrape(); strings.Contains(out, "ployz_job_runs_total") || !strings.Contains(out, `ployz_metric_gap{metric="job.runs",reason="counters `) {
		t.Fatalf("a broken counters file, want a named gap:\n%s", out)
	}
}

// TestPrometheusServesVolumeProtection: ployzd's automatic snapshot
// counts, the newest snapshot's time and each Mirror's last sync reach
// the endpoint.
func TestPrometheusServesVolumeProtection(t *testing.T) {
	path, scrape := countersScrape(t)
	if err := observe.WriteCounters(path, observe.Counters{VolumeProtection: []observe.VolumeProtection{
		{Volume: "db", Snapshots: map[string]int64{"taken": 3, "pruned": 2}, LastSnapshot: 1_700_000_000_000, Mirrors: []observe.MirrorSync{{Machine: "m2", LastSync: 1_699_999_280_000}}},
		{Volume: "cache"},
	}}); err != nil {
		t.Fatal(err)
	}
	out := scrape()
	for _, want := range []string{
		"# TYPE ployz_volume_snapshots_total counter",
		`ployz_volume_snapshots_total{result="pruned",scope="machine",volume="db"} 2`,
		`ployz_volume_snapshots_total{result="taken",scope="machine",volume="db"} 3`,
		`ployz_volume_last_snapshot_timestamp_seconds{scope="machine",volume="db"} 1.7e+09`,
		`ployz_volume_mirror_last_sync_timestamp_seconds{mirror="m2",scope="machine",volume="db"} 1.69999928e+09`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `volume="cache"`) {
		t.Errorf("a volume with nothing counted is served:\n%s", out)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(out)); err != nil {
		t.Fatalf("scrape does not parse: %v\n%s", err, out)
	}
}

// TestPrometheusServesMirrorLag: each Mirror's lag is the sample's time
// minus its last sync, as `volume inspect` reads it; a sync dated after
// the sample (a skewed clock) is 0 behind, never negative.
func TestPrometheusServesMirrorLag(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	tick := Tick{Time: at, Counters: observe.Counters{VolumeProtection: []observe.VolumeProtection{
		{Volume: "db", Mirrors: []observe.MirrorSync{
			{Machine: "m2", LastSync: at.Add(-12 * time.Minute).UnixMilli()},
			{Machine: "m3", LastSync: at.Add(time.Minute).UnixMilli()},
		}},
	}}}
	var b strings.Builder
	if err := WritePrometheus(&b, tick); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# TYPE ployz_volume_mirror_lag_seconds gauge",
		`ployz_volume_mirror_lag_seconds{mirror="m2",scope="machine",volume="db"} 720`,
		`ployz_volume_mirror_lag_seconds{mirror="m3",scope="machine",volume="db"} 0`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q:\n%s", want, out)
		}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(out)); err != nil {
		t.Fatalf("scrape does not parse: %v\n%s", err, out)
	}
}
