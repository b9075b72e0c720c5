package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func tickAt(t time.Time, cpuA, cpuB float64, gapB string) Tick {
	a := Subject{Container: "aaaa1111", Name: "web-1", Namespace: "p", Service: "web", Deployment: "d1"}
	b := Subject{Container: "bbbb2222", Name: "web-2", Namespace: "p", Service: "web", Deployment: "d1"}
	tk := Tick{Time: t, Subjects: map[string]Subject{a.Key(): a, b.Key(): b, "machine": {}},
		Values: map[string][]Value{
			a.Key():   {{Metric: MetricCPU, Value: cpuA}, {Metric: MetricMem, Value: 100}},
			b.Key():   {{Metric: MetricCPU, Value: cpuB}, {Metric: MetricMem, Value: 200}},
			"machine": {{Metric: MetricCPU, Value: cpuA + cpuB}},
		}}
	if gapB != "" {
		tk.Values[b.Key()][0] = Value{Metric: MetricCPU, Gap: gapB}
	}
	return tk
}

// TestSamplesRollupsGapsAndRetention drives the store with a fake clock:
// an hour and a half of 10 s ticks for a Service of two Containers, one of
// which could not be read for a minute, and two minutes with no tick at
// all (the plugin was down).
func TestSamplesRollupsGapsAndRetention(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	for i := 0; i < 540; i++ { // 90 minutes
		now = t0.Add(time.Duration(i) * Interval)
		if i >= 60 && i < 72 { // 10:10-10:12: no tick
			continue
		}
		if i == 72 {
			if err := s.Started(now); err != nil {
				t.Fatal(err)
			}
		}
		gap := ""
		if i >= 30 && i < 36 { // 10:05-10:06: b's cpu unreadable
			gap = "cpu.stat: permission denied"
		}
		if err := s.Write(tickAt(now, float64(i%3), 1, gap)); err != nil {
			t.Fatal(err)
		}
	}
	// Raw: the Service is the sum of its Containers, per tick.
	res, err := s.Query(Query{Service: "web", Metrics: []string{MetricCPU}, From: t0.UnixNano(), To: t0.Add(time.Minute).UnixNano()}, now)
	if err != nil || len(res.Series) != 1 || res.Resolution != Interval {
		t.Fatalf("raw web cpu: %+v %v", res, err)
	}
	if ps := res.Series[0].Points; len(ps) != 7 || ps[0].Value != 1 || ps[1].Value != 2 || ps[2].Value != 3 || res.Series[0].Subject.Service != "web" {
		t.Fatalf("raw web cpu points %+v", ps)
	}
	// The unreadable minute is a named gap for b, and the down minutes one
	// for the Machine; neither is a zero.
	res, _ = s.Query(Query{Container: "web-2", Metrics: []string{MetricCPU}, From: t0.UnixNano()}, now)
	var named, down bool
	for _, g := range res.Gaps {
		if g.Subject != nil && g.Subject.Container == "bbbb2222" && g.Reason == "cpu.stat: permission denied" &&
			g.From == t0.Add(5*time.Minute).UnixNano() && g.To == t0.Add(5*time.Minute+50*time.Second).UnixNano() {
			named = true
		}
		if g.Metric == "*" && g.Reason == ReasonNotRunning && g.From == t0.Add(590*time.Second).UnixNano() && g.To == t0.Add(12*time.Minute).UnixNano() {
			down = true
		}
	}
	if !named || !down {
		t.Fatalf("gaps %+v: named %v, downtime %v", res.Gaps, named, down)
	}
	for _, p := range res.Series[0].Points {
		if p.T >= t0.Add(5*time.Minute).UnixNano() && p.T < t0.Add(6*time.Minute).UnixNano() {
			t.Fatalf("a value at %v inside the gap: %+v", time.Unix(0, p.T), p)
		}
	}

	// Folding waits for the hour to close, then writes 5-minute Rollups.
	if err := s.Fold(t0.Add(30 * time.Minute)); err != nil || len(s.listDirs("rollup", dayLayout)) != 0 {
		t.Fatalf("folded an open hour: %v", err)
	}
	if err := s.Fold(now); err != nil {
		t.Fatal(err)
	}
	res, _ = s.Query(Query{Service: "web", Metrics: []string{MetricCPU}, From: t0.UnixNano(), To: t0.Add(time.Hour).UnixNano(), Step: RollupStep}, now)
	if len(res.Series) != 1 || res.Resolution != RollupStep || len(res.Series[0].Points) != 12 {
		t.Fatalf("rollups %+v", res)
	}
	p := res.Series[0].Points[0] // 10:00-10:05: a cycles 0,1,2 (30 ticks), b is 1
	if !p.Rollup || p.Min != 1 || p.Max != 3 || p.Value != 2 || p.Last != 3 {
		t.Fatalf("first rollup %+v", p)
	}
	p = res.Series[0].Points[1] // 10:05-10:10: b unreadable for 6 ticks: only a counts then
	if p.Min != 0 {
		t.Fatalf("second rollup %+v: the gap's ticks sum a alone", p)
	}
	if res, _ := s.Query(Query{Deployment: "d1", Metrics: []string{MetricMem}, From: t0.UnixNano(), Step: RollupStep}, now); len(res.Series) != 1 || res.Series[0].Points[0].Value != 300 {
		t.Fatalf("deployment mem rollup %+v", res.Series)
	}
	if res, _ := s.Query(Query{Machine: true, From: t0.UnixNano(), Step: RollupStep}, now); len(res.Series) != 1 || res.Series[0].Subject.Container != "" {
		t.Fatalf("machine rollup %+v", res.Series)
	}

	// Raw samples go after 24 h, Rollups after 90 days.
	s.Fold(now.Add(25 * time.Hour))
	if hs := s.listDirs("raw", hourLayout); len(hs) != 0 {
		t.Fatalf("raw hours after 25 h: %v", hs)
	}
	if res, _ := s.Query(Query{Service: "web", From: t0.UnixNano(), Step: RollupStep}, now.Add(25*time.Hour)); len(res.Series) == 0 || len(res.Series[0].Points) != 18 {
		t.Fatalf("the 11:00 hour was deleted before it was folded: %+v", res.Series)
	}
	s.Fold(now.Add(91 * 24 * time.Hour))
	if ds := s.listDirs("rollup", dayLayout); len(ds) != 0 {
		t.Fatalf("rollup days after 91 days: %v", ds)
	}
}

func TestUnknownFormatIsDeleted(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("ployz-metrics 0\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "raw", "2026120110"), 0o700)
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raw")); !os.IsNotExist(err) {
		t.Fatalf("raw kept from an unknown format: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "FORMAT")); strings.TrimSpace(string(b)) != FormatVersion {
		t.Fatalf("FORMAT %q", b)
	}
}
