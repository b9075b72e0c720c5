package logstore

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/internal/dockertest"
	"github.com/ployz/ployz/internal/prereq"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchIngestVsDockerLogs (PLOYZ_BENCH=1) floods a Container with N
// lines, then, in the same run, times the Log Store ingesting its local
// driver files from scratch against `docker logs` reading the same
// output. Printed, never gating.
func TestBenchIngestVsDockerLogs(t *testing.T) {
	if os.Getenv("PLOYZ_BENCH") == "" {
		prereq.Skip(t, "a measurement, printed and never gating: set PLOYZ_BENCH=1")
	}
	img := dockertest.Image(t)
	root := dockertest.Root(t)
	const n = 200000
	// One file (no rotation): the store reads it from scratch, as it
	// would a Container that logged while the plugin was stopped.
	id := docker(t, "run", "-d", "--log-driver", "local", "--log-opt", "max-size=1g", "--label", "ployz.namespace=bench", "--label", "ployz.service=flood",
		img, "lines", "flood line %d with some padding to look like a log line", "1", strconv.Itoa(n+1), "sleep", "600s")
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		out, _ := exec.Command("docker", "logs", "--tail", "1", id).Output()
		if strings.Contains(string(out), fmt.Sprintf("line %d ", n)) {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the flood did not finish")
		}
	}

	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := NewIngester(root, s, hclog.NewNullLogger())
	defer in.Close()
	c0, t0 := cpuTime(), time.Now()
	for in.Lines() < n {
		if err := in.Poll(); err != nil {
			t.Fatal(err)
		}
		if time.Since(t0) > 5*time.Minute {
			t.Fatalf("ingested %d of %d lines in 5 minutes", in.Lines(), n)
		}
	}
	ingest, ingestCPU := time.Since(t0), cpuTime()-c0

	t1 := time.Now()
	out, err := exec.Command("docker", "logs", id).Output()
	if err != nil {
		t.Fatal(err)
	}
	dockerLogs := time.Since(t1)
	if got := strings.Count(string(out), "\n"); got != n {
		t.Fatalf("docker logs printed %d lines", got)
	}
	t.Logf("BENCH log ingest: %d lines in %v = %.0f lines/s, %.1f ms CPU per 10k lines, store %d bytes",
		n, ingest.Round(time.Millisecond), float64(n)/ingest.Seconds(), float64(ingestCPU.Milliseconds())*10000/n, s.Size())
	t.Logf("BENCH docker logs of the same Container: %d lines in %v = %.0f lines/s", n, dockerLogs.Round(time.Millisecond), float64(n)/dockerLogs.Seconds())
}
