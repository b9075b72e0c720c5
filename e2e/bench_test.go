package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// BenchmarkMeshVsLabNetwork measures TCP throughput and ping latency
// between two lab Machines over the userspace WireGuard mesh and over the
// plain lab network, in one run, and reports their ratios (issue 5).
func BenchmarkMeshVsLabNetwork(b *testing.B) {
	needLab(b)
	l := lab.ForTest(b, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	op := newOperator(b, l)
	var in rpc.Inspection
	op.json(b, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", "m1")
	op.json(b, &in, "machine", "add", "root@"+l.Machines[1].IP.String(), "--name", "m2")
	meshIP := strings.TrimSuffix(in.Subnet, "0/24") + "1"
	if _, err := l.Exec(ctx, "m2", "docker", "run", "-d", "--network", "host", lab.TestAppImage); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second)
	const size = 200 << 20
	speed := func(ip string) float64 {
		out, err := l.Exec(ctx, "m1", "curl", "-s", "-o", "/dev/null", "-w", "%{size_download} %{speed_download}", "http://"+ip+":8080/bytes?n="+strconv.Itoa(size))
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(out)
		if len(f) != 2 || f[0] != strconv.Itoa(size) {
			b.Fatalf("download from %s: %q, want %d bytes", ip, out, size)
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		return v / (1 << 20)
	}
	rtt := func(ip string) float64 {
		out, err := l.Exec(ctx, "m1", "ping", "-q", "-c", "50", "-i", "0.01", ip)
		if err != nil {
			b.Fatal(err)
		}
		m := regexp.MustCompile(`= [\d.]+/([\d.]+)/`).FindStringSubmatch(out)
		if m == nil {
			b.Fatalf("ping output %q", out)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	labIP := l.Machines[1].IP.String()
	b.ResetTimer()
	var meshMB, labMB, meshRTT, labRTT float64
	for range b.N {
		meshMB += speed(meshIP)
		labMB += speed(labIP)
		meshRTT += rtt(meshIP)
		labRTT += rtt(labIP)
	}
	n := float64(b.N)
	b.ReportMetric(meshMB/n, "mesh-MB/s")
	b.ReportMetric(labMB/n, "lab-MB/s")
	b.ReportMetric(meshMB/labMB, "throughput-ratio")
	b.ReportMetric(meshRTT/n, "mesh-rtt-ms")
	b.ReportMetric(labRTT/n, "lab-rtt-ms")
	b.ReportMetric(meshRTT/labRTT, "latency-ratio")
	b.Logf("mesh %.0f MB/s vs lab network %.0f MB/s (%.2f); rtt %.3f ms vs %.3f ms (%.2fx)", meshMB/n, labMB/n, meshMB/labMB, meshRTT/n, labRTT/n, meshRTT/labRTT)
}

// BenchmarkDNSOnLabMachine measures Internal DNS on a lab Machine: a
// stub-resolver-like client pinned to one core sends A queries one after
// another to the Machine's gateway :53 and reports queries/s and p99
// (issue 7). The client is latency-bound, so queries/s is not peak load.
func BenchmarkDNSOnLabMachine(b *testing.B) {
	needLab(b)
	l := lab.ForTest(b, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	op := newOperator(b, l)
	var in rpc.Inspection
	op.json(b, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", "m1")
	gw := strings.TrimSuffix(in.Subnet, "0/24") + "1"
	if _, err := l.Exec(ctx, "m1", "docker", "run", "-d", "--network", "ployz", "--label", "ployz.namespace=bench-prod",
		"--label", "ployz.service=api", "--label", "ployz.readiness=none", lab.TestAppImage); err != nil {
		b.Fatal(err)
	}
	name := "api.bench-prod.internal"
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := l.Exec(ctx, "m1", "ployz-dns", "query-loop", "--server", gw+":53", "--name", name, "--count", "1"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s never resolved on m1", name)
		}
		time.Sleep(500 * time.Millisecond)
	}
	const count = 20000
	b.ResetTimer()
	var qps, p99 float64
	for range b.N {
		out, err := l.Exec(ctx, "m1", "taskset", "-c", "0", "ployz-dns", "query-loop", "--server", gw+":53", "--name", name,
			"--count", strconv.Itoa(count), "--attempts", "1")
		if err != nil {
			b.Fatal(err)
		}
		var res struct {
			Queries int   `json:"queries"`
			Failed  int   `json:"failed"`
			P99     int64 `json:"p99_ns"`
			Elapsed int64 `json:"elapsed_ns"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Failed > 0 {
			b.Fatalf("query loop: %q %v", out, err)
		}
		qps += float64(res.Queries) / (float64(res.Elapsed) / 1e9)
		p99 += float64(res.P99) / 1e6
	}
	n := float64(b.N)
	b.ReportMetric(qps/n, "queries/s")
	b.ReportMetric(p99/n, "p99-ms")
	b.Logf("internal DNS on a lab Machine, one client core: %.0f queries/s, p99 %.3f ms", qps/n, p99/n)
}
