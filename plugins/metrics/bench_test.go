package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/dockertest"
	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/sdk/observe"
	"github.com/ployz/ployz/sdk/plugintest"
	metricsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/metrics/v1"
)

// procCPU returns a process's user+system time and resident memory.
func procCPU(t *testing.T, pid int) (time.Duration, int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	var rss int64
	s, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(s), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			rss, _ = strconv.ParseInt(strings.Fields(l)[1], 10, 64)
		}
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, rss * 1024
}

// TestBenchMetricsPlugin (PLOYZ_BENCH=1) runs the real plugin next to N
// labelled Containers for a minute and prints its CPU and RSS, then the
// time of a 24 h query for one Service. Printed, never gating.
func TestBenchMetricsPlugin(t *testing.T) {
	if os.Getenv("PLOYZ_BENCH") == "" {
		prereq.Skip(t, "a measurement, printed and never gating: set PLOYZ_BENCH=1")
	}
	n := 50
	if v, err := strconv.Atoi(os.Getenv("PLOYZ_BENCH_CONTAINERS")); err == nil {
		n = v
	}
	img := dockertest.Image(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command("docker", "run", "-d", "--label", "ployz.namespace=mbench", "--label", fmt.Sprintf("ployz.service=s%d", i%10),
				"--label", "ployz.deployment=d1", img, "sleep", "900s").Output()
			if err == nil {
				mu.Lock()
				ids = append(ids, strings.TrimSpace(string(out)))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() { exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run() })
	bin := plugintest.Build(t, "github.com/ployz/ployz/plugins/metrics")
	dir := t.TempDir()
	spec, _ := json.Marshal(observe.Spec{StateDir: filepath.Join(dir, "observe")})
	specPath := filepath.Join(dir, "metrics.json")
	os.WriteFile(specPath, spec, 0o644)
	cmd := plugintest.ServeLongLived(t, bin, filepath.Join(dir, "m.sock"), "--spec", specPath)
	time.Sleep(5 * time.Second) // past start-up
	c0, _ := procCPU(t, cmd.Process.Pid)
	const window = 60 * time.Second
	time.Sleep(window)
	c1, rss := procCPU(t, cmd.Process.Pid)
	t.Logf("BENCH metrics plugin with %d Containers: %.2f%% of a core over %v (%v CPU), RSS %.1f MiB",
		len(ids), 100*(c1-c0).Seconds()/window.Seconds(), window, c1-c0, float64(rss)/(1<<20))

	p := plugintest.Attach(t, filepath.Join(dir, "m.sock"))
	t0 := time.Now()
	resp, err := metricsv1.NewMetricsClient(p.Conn).QueryMetrics(context.Background(), &metricsv1.QueryMetricsRequest{
		Selector: &metricsv1.Selector{Service: "s1"}, FromUnixNanos: time.Now().Add(-24 * time.Hour).UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BENCH 24 h query for one Service (of %d Containers, only a minute of history here): %v, %d series", len(ids), time.Since(t0), len(resp.GetSeries()))
}
