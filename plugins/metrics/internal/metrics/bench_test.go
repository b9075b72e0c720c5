package metrics

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/plugins/internal/obsfs"
)

// TestBenchQuery24h (PLOYZ_BENCH=1) fills a store with 24 hours of 10 s
// samples for 50 Containers (5 per Service) and times a 24 h raw query for
// one Service. Printed, never gating (goal: under 100 ms).
func TestBenchQuery24h(t *testing.T) {
	if os.Getenv("PLOYZ_BENCH") == "" {
		prereq.Skip(t, "a measurement, printed and never gating: set PLOYZ_BENCH=1")
	}
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	start := now.Add(-24 * time.Hour)
	for c := 0; c < 50; c++ {
		sub := Subject{Container: fmt.Sprintf("c%063d", c), Name: fmt.Sprintf("w-%d", c), Namespace: "p", Service: fmt.Sprintf("s%d", c%10), Deployment: "d1"}
		s.subjects[sub.Key()] = sub
		for h := 0; h < 24; h++ {
			var b []byte
			hs := start.Add(time.Duration(h) * time.Hour)
			for i := 0; i < 360; i++ {
				ts := hs.Add(time.Duration(i) * Interval).UnixNano()
				for m := 0; m < 7; m++ {
					b = binary.BigEndian.AppendUint64(b, uint64(ts))
					b = append(b, byte(m))
					b = binary.BigEndian.AppendUint64(b, math.Float64bits(float64(i)))
				}
			}
			if err := obsfs.AppendFile(filepath.Join(s.dir, "raw", hs.Format(hourLayout), fileKey(sub.Key())+".bin"), b); err != nil {
				t.Fatal(err)
			}
		}
	}
	t0 := time.Now()
	res, err := s.Query(Query{Service: "s3", From: start.UnixNano()}, now)
	if err != nil || len(res.Series) != 7 || len(res.Series[0].Points) != 8640 {
		t.Fatalf("%d series, %v", len(res.Series), err)
	}
	d := time.Since(t0)
	t1 := time.Now()
	res, _ = s.Query(Query{Service: "s3", Metrics: []string{MetricCPU}, From: start.UnixNano()}, now)
	t.Logf("BENCH 24 h raw query, one Service of 5 Containers among 50: all 7 metrics %v; cpu.cores only %v (%d points)",
		d.Round(time.Millisecond), time.Since(t1).Round(time.Millisecond), len(res.Series[0].Points))
}
