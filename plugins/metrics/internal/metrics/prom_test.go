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

// TestPrometheusServesDroppedStoreEvents: ployzd's counters file reaches
// the endpoint as one counter per process and table; a file that cannot
// be read is a named gap, never a zero; no file yet serves no counter.
func TestPrometheusServesDroppedStoreEvents(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "counters.json")
	c := &Collector{Sys: Sys{Proc: dir, Cgroup: dir, Containers: dir, DiskPath: dir},
		Counters: func() (observe.Counters, error) { return observe.ReadCounters(path) }}
	scrape := func() string {
		t.Helper()
		var b strings.Builder
		if err := WritePrometheus(&b, c.Collect(time.Now())); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
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
