package store

import (
	"fmt"
	"testing"
	"time"
)

// scaleLatency is the simulated network of every scale run: each message
// waits 10 ms ± 5 ms one way.
const scaleLatency, scaleJitter = 10 * time.Millisecond, 5 * time.Millisecond

// TestScale10 runs the scale harness at 10 nodes with production timers
// and asserts that everything converges within bounds loose enough for a
// loaded 2-core host. -short (make race) runs 5 nodes and fewer rows.
func TestScale10(t *testing.T) {
	cfg := scaleConfig{Nodes: 10, Rows: 2000, Writes: 20, Rest: 5 * time.Second, Latency: scaleLatency, Jitter: scaleJitter}
	if testing.Short() {
		cfg.Nodes, cfg.Rows, cfg.Writes = 5, 300, 10
	}
	r := runScale(t, cfg)
	t.Logf("%d nodes, load average %s: %s", cfg.Nodes, loadAverage(), r)
	bounds := []struct {
		what      string
		got, want time.Duration
	}{
		{"write → every node p99", r.quantile(99), 5 * time.Second},
		{"catch-up of a new node", r.CatchUp, 60 * time.Second},
		// Production SWIM: suspicion after a missed probe, Down after
		// 4 × log10(N) probe intervals of 1 s, longer while few confirm.
		{"Down verdict on every node", r.DownAll, 45 * time.Second},
	}
	for _, b := range bounds {
		if b.got > b.want {
			t.Errorf("%s took %s, bound %s", b.what, b.got, b.want)
		}
	}
	// At rest a node sends SWIM probes and gossip and one sync request a
	// second to three peers; a few KB/s. 20 KB/s means something loops.
	if r.WireBps > 20_000 {
		t.Errorf("at rest each node sends %.0f B/s, bound 20000", r.WireBps)
	}
	// Digest requests (about 120 bytes, three a second); whole books were
	// 860 bytes each at 10 nodes and grow with every member.
	if r.SyncReqBps > 1000 {
		t.Errorf("at rest each node sends %.0f B/s of sync requests, bound 1000: are books sent instead of digests?", r.SyncReqBps)
	}
	if r.SyncReqBps <= 0 || r.WireBps <= 0 {
		t.Errorf("traffic counters read wire %.0f B/s, sync requests %.0f B/s at rest: both must count", r.WireBps, r.SyncReqBps)
	}
}

// BenchmarkStoreScale runs the scale harness at 10, 30, 50 and 100 nodes
// (production timers, 10 ± 5 ms one way, 2,000 Container rows) and reports
// each phase per node. It never fails on a number; select sizes with
// -bench 'BenchmarkStoreScale/(10|30)nodes'.
func BenchmarkStoreScale(b *testing.B) {
	for _, n := range []int{10, 30, 50, 100} {
		b.Run(fmt.Sprintf("%dnodes", n), func(b *testing.B) {
			cfg := scaleConfig{Nodes: n, Rows: 2000, Writes: 50, Rest: 20 * time.Second, Latency: scaleLatency, Jitter: scaleJitter}
			var r scaleResult
			for i := 0; i < b.N; i++ {
				r = runScale(b, cfg)
			}
			b.Logf("%d nodes, load average %s: %s", n, loadAverage(), r)
			reportScale(b, r)
		})
	}
}

func reportScale(b *testing.B, r scaleResult) {
	b.ReportMetric(ms(r.quantile(50)), "visible-p50-ms")
	b.ReportMetric(ms(r.quantile(99)), "visible-p99-ms")
	b.ReportMetric(ms(r.WriteCPU), "write-cpu-ms/node")
	b.ReportMetric(r.WireBps, "rest-wire-B/s/node")
	b.ReportMetric(r.StoreBps, "rest-store-B/s/node")
	b.ReportMetric(100*r.CPU, "rest-cpu-%core/node")
	b.ReportMetric(float64(r.RSS)/(1<<20), "rss-MB/node")
	b.ReportMetric(r.CatchUp.Seconds(), "catchup-2000rows-s")
	b.ReportMetric(r.DownFirst.Seconds(), "down-first-s")
	b.ReportMetric(r.DownAll.Seconds(), "down-all-s")
	b.ReportMetric(r.Form.Seconds(), "form-s")
	b.ReportMetric(r.Load.Seconds(), "load-2000rows-s")
	b.ReportMetric(float64(r.LoadBroadcast)/(1<<10), "load-pushed-KB/node")
	b.ReportMetric(float64(r.LoadAnswers)/(1<<10), "load-answers-KB/node")
	b.ReportMetric(ms(r.LoadCPU), "load-cpu-ms/row/node")
}
