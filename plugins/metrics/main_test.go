package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ployz/ployz/sdk/observe"
	"github.com/ployz/ployz/sdk/plugintest"
	metricsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/metrics/v1"
)

// TestBinarySamplesAndServes runs ployz-metrics as its unit does: it
// advertises QueryMetrics, answers the Machine's series from its first
// tick, and its Prometheus endpoint parses with Prometheus' own parser
// (legacy metric names, so every scraper accepts them).
func TestBinarySamplesAndServes(t *testing.T) {
	root := "/var/lib/docker"
	if out, err := exec.Command("docker", "info", "--format", "{{.DockerRootDir}}").Output(); err == nil {
		root = strings.TrimSpace(string(out))
	}
	bin := plugintest.Build(t, "github.com/ployz/ployz/plugins/metrics")
	dir := t.TempDir()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	listen := l.Addr().String()
	l.Close()
	spec, _ := json.Marshal(observe.Spec{DockerRoot: root, StateDir: filepath.Join(dir, "observe"), MetricsListen: listen})
	specPath := filepath.Join(dir, "metrics.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "metrics.sock")
	plugintest.ServeLongLived(t, bin, socket, "--spec", specPath)
	p := plugintest.Attach(t, socket)
	if caps := strings.Join(p.Info.GetCapabilities(), ","); caps != observe.CapQueryMetrics {
		t.Fatalf("capabilities %s", caps)
	}
	cli := metricsv1.NewMetricsClient(p.Conn)
	ctx := context.Background()
	var resp *metricsv1.QueryMetricsResponse
	var err error
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		resp, err = cli.QueryMetrics(ctx, &metricsv1.QueryMetricsRequest{Selector: &metricsv1.Selector{Machine: true},
			Metrics: []string{"mem.bytes"}, FromUnixNanos: time.Now().Add(-time.Minute).UnixNano()})
		if err == nil && len(resp.GetSeries()) == 1 && len(resp.GetSeries()[0].GetPoints()) > 0 {
			break
		}
	}
	if err != nil || len(resp.GetSeries()) != 1 || resp.GetSeries()[0].GetPoints()[0].GetValue() <= 0 || resp.GetResolutionSeconds() != 10 {
		t.Fatalf("machine mem.bytes: %v %v", resp, err)
	}
	if _, err := cli.QueryMetrics(ctx, &metricsv1.QueryMetricsRequest{Metrics: []string{"cpu.bogus"}}); err == nil || !strings.Contains(err.Error(), "cpu.bogus") {
		t.Fatalf("an unknown metric must be refused naming it: %v", err)
	}

	r, err := http.Get(fmt.Sprintf("http://%s/metrics", listen))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(r.Body)
	if err != nil {
		t.Fatalf("prometheus text does not parse: %v", err)
	}
	if f := fams["ployz_mem_bytes"]; f == nil || len(f.GetMetric()) == 0 {
		t.Fatalf("no ployz_mem_bytes in %v", fams)
	}
}
