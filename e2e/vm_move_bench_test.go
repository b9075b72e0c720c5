package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// BenchmarkVMVolumeMove moves a Service with a 1 GiB Provisioned Volume
// between two VM Machines (issue 19) and reports the move's total time,
// its downtime and its bulk send's throughput beside a plain
// `zfs send | zfs recv` of the same data over the same route (through
// this computer, over SSH), in the same run. PLOYZ_BENCH_MOVE_MIB sets
// another size.
func BenchmarkVMVolumeMove(b *testing.B) {
	needVMLab(b)
	mib := 1024
	if s := os.Getenv("PLOYZ_BENCH_MOVE_MIB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("PLOYZ_BENCH_MOVE_MIB: %q is not a positive number", s)
		}
		mib = n
	}
	l := lab.ForTestVM(b, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	op := newVMOperator(b, l)
	op.must(b, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", "m1", "--zfs-pool", "ployz")
	op.must(b, "machine", "add", "root@"+l.Machines[1].IP.String(), "--name", "m2")
	op.must(b, "machine", "update", "m2", "--zfs-pool", "ployz")
	op.must(b, "volume", "create", "big", "--machine", "m1", "--size", strconv.Itoa(mib+256)+"MiB")
	if out, err := fillVolume(ctx, l, "m1", "big", "blob", mib<<20); err != nil {
		b.Fatalf("fill: %v: %s", err, out)
	}
	f := filepath.Join(b.TempDir(), "compose.yaml")
	doc := "name: bench\nservices:\n  db:\n    image: " + lab.TestAppImage + "\n    environment: {DATA_DIR: /data}\n    volumes: [\"/var/lib/ployz/volumes/big:/data\"]\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		b.Fatal(err)
	}
	op.must(b, "deploy", "-f", f, "-y")

	// The plain tool: a full zfs send of the same data into m2's pool,
	// piped through this computer as the CLI's transfer is.
	if _, err := l.Exec(ctx, "m1", "zfs", "snapshot", "ployz/ployz/volumes/big@plain"); err != nil {
		b.Fatal(err)
	}
	src, _ := l.SSHArgs("m1")
	dst, _ := l.SSHArgs("m2")
	pipe := strings.Join(src, " ") + " zfs send ployz/ployz/volumes/big@plain | " + strings.Join(dst, " ") + " zfs recv ployz/plaincopy"
	b.ResetTimer()
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "sh", "-c", pipe).CombinedOutput(); err != nil {
		b.Fatalf("zfs send | zfs recv: %v: %s", err, out)
	}
	plain := time.Since(start)
	b.StopTimer()
	if _, err := l.Exec(ctx, "m2", "zfs", "destroy", "-r", "ployz/plaincopy"); err != nil {
		b.Fatal(err)
	}

	var run struct {
		Run struct {
			State    string  `json:"state"`
			Downtime float64 `json:"downtime_seconds"`
			Steps    []struct {
				Name    string
				Detail  string
				Bytes   float64
				Seconds float64
			} `json:"steps"`
		} `json:"run"`
	}
	b.StartTimer()
	start = time.Now()
	op.json(b, &run, "volume", "move", "big", "--to", "m2")
	total := time.Since(start)
	b.StopTimer()
	if run.Run.State != "done" {
		b.Fatalf("move: %+v", run.Run)
	}
	var bulkBytes, bulkSecs, cutBytes float64
	for _, s := range run.Run.Steps {
		if s.Name != "send" {
			continue
		}
		if bulkSecs == 0 {
			bulkBytes, bulkSecs = s.Bytes, s.Seconds
		} else {
			cutBytes = s.Bytes
		}
	}
	plainMBs := float64(mib) * 1.048576 / plain.Seconds()
	bulkMBs := bulkBytes / 1e6 / bulkSecs
	b.ReportMetric(plainMBs, "zfs-send-recv-MB/s")
	b.ReportMetric(bulkMBs, "ployz-send-MB/s")
	b.ReportMetric(bulkMBs/plainMBs, "ployz/zfs-throughput")
	b.ReportMetric(total.Seconds(), "move-total-s")
	b.ReportMetric(run.Run.Downtime, "move-downtime-s")
	b.ReportMetric(cutBytes, "cut-bytes")
	// One line: a benchmark's log keeps only its first ten lines.
	var steps []string
	for _, s := range run.Run.Steps {
		steps = append(steps, fmt.Sprintf("%s %.1fs", s.Name, s.Seconds))
	}
	b.Logf("steps: %s", strings.Join(steps, "; "))
	b.Logf("%d MiB: zfs send|recv %.1f s (%.1f MB/s); ployz volume move %.1f s, bulk send %.1f MB/s (%.2fx), cut %.0f bytes, downtime %.2f s",
		mib, plain.Seconds(), plainMBs, total.Seconds(), bulkMBs, bulkMBs/plainMBs, cutBytes, run.Run.Downtime)
}
