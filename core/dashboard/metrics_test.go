package dashboard

import (
	"context"
	"testing"
	"time"
)

func TestMetricsQueryGaps(t *testing.T) {
	src := newFake()
	now := time.Now()
	from := now.Add(-time.Hour)
	ms, _ := src.Metrics(context.Background(), MetricsQuery{Since: from, Until: now})
	c := BuildCharts(ms, from, now, 10)
	if len(c.Charts) != 1 || c.Charts[0].Metric != "cpu.cores" || len(c.Charts[0].Series) != 2 {
		t.Fatalf("charts %+v", c.Charts)
	}
	ch := c.Charts[0]
	m1, m2 := ch.Series[0], ch.Series[1]
	if len(m1.Values) != len(ch.Times) {
		t.Fatalf("%d values for %d times", len(m1.Values), len(ch.Times))
	}
	var values, nulls int
	for i, v := range m1.Values {
		at := time.Unix(ch.Times[i], 0)
		inGap := at.After(now.Add(-30*time.Minute)) && at.Before(now.Add(-20*time.Minute-10*time.Second))
		switch {
		case inGap && v != nil:
			t.Fatalf("m1 has %v at %s inside its named gap; a gap is never a value", *v, at)
		case v != nil:
			if *v != 0.25 {
				t.Fatalf("value %v at %s", *v, at)
			}
			values++
		default:
			nulls++
		}
	}
	if values < 290 || nulls < 55 || nulls > 70 {
		t.Fatalf("m1: %d values, %d nulls; want the 10-minute gap (about 60 buckets) as nulls", values, nulls)
	}
	for _, v := range m2.Values {
		if v != nil {
			t.Fatal("m2 did not answer, yet has a value")
		}
	}
	named := map[string]string{}
	for _, g := range c.Gaps {
		named[g.Machine] = g.Reason
	}
	if named["m1"] != "machine stopped" || named["m2"] != "no answer: connection refused" {
		t.Fatalf("named gaps %+v", c.Gaps)
	}
	if len(c.Markers) != 1 || c.Markers[0].Kind != "deploy" || c.Markers[0].Machine != "m1" {
		t.Fatalf("markers %+v", c.Markers)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	_, ts := serve(t, newFake(), time.Second)
	for _, r := range []string{"1h", "24h", "90d"} {
		var c Charts
		if code := getJSON(t, ts.Client(), ts.URL+"/api/metrics?range="+r+"&namespace=app-prod&service=web", &c); code != 200 || c.Range != r || len(c.Charts) != 1 {
			t.Fatalf("range %s: %d %+v", r, code, c.Range)
		}
		if n := len(c.Charts[0].Times); n > 800 {
			t.Errorf("range %s: %d points, want about 720 at most", r, n)
		}
	}
	var fe FieldError
	if code := getJSON(t, ts.Client(), ts.URL+"/api/metrics?service=web", &fe); code != 400 || fe.Field != "namespace" {
		t.Fatalf("service without namespace: %d %+v", code, fe)
	}
}
