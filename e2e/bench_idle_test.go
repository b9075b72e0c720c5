package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// Idle goals per Machine for all Ployz processes together (issue 48).
const (
	idleCPUGoal = 1.0 // % of one core
	idlePSSGoal = 100 // MiB
	idleWindow  = 30 * time.Second
)

// idleSampleScript prints one line per process of every running Ployz
// unit (ployzd, the store, wireguard, each plugin): the unit, the pid,
// utime+stime in clock ticks and the PSS in KiB. The unit's cgroup lists
// every process it runs; MainPID is the fallback where the cgroup is not
// readable. The first line is the clock tick rate.
const idleSampleScript = `getconf CLK_TCK
for u in $(systemctl list-units --type=service --state=running --no-legend --plain 'ployz*' | cut -d' ' -f1); do
  cg=$(systemctl show -p ControlGroup --value "$u")
  pids=$(cat "/sys/fs/cgroup$cg/cgroup.procs" 2>/dev/null)
  [ -n "$pids" ] || pids=$(systemctl show -p MainPID --value "$u")
  for p in $pids; do
    [ "$p" -gt 0 ] 2>/dev/null || continue
    t=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null) || continue
    k=$(awk '/^Pss:/{print $2}' /proc/$p/smaps_rollup 2>/dev/null)
    [ -n "$t" ] && echo "$u $p $t ${k:-0}"
  done
done`

// idleProc is one process of a Ployz unit at one instant.
type idleProc struct {
	unit   string
	ticks  int64
	pssKiB int64
}

// idleSample is every Ployz process of one Machine, by pid.
type idleSample struct {
	hz    int64
	procs map[int]idleProc
}

// BenchmarkIdleMachine measures the idle cost of a Machine (issue 48): a
// 3-Machine Cluster with the example (examples/hello) deployed is left
// alone for 30 s, and for each Machine it prints every Ployz process's CPU
// (% of one core over the window) and proportional set size (PSS from
// /proc/PID/smaps_rollup, so pages shared between processes count once),
// and the per-Machine totals against the goals: ≤ 1% of a core and
// ≤ 100 MiB.
func BenchmarkIdleMachine(b *testing.B) {
	needLab(b)
	l := lab.ForTest(b, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	op := newOperator(b, l)
	formCluster(b, l, op)
	compose, err := os.ReadFile(filepath.Join("..", "examples", "hello", "compose.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	f := filepath.Join(b.TempDir(), "compose.yaml")
	if err := os.WriteFile(f, compose, 0o644); err != nil {
		b.Fatal(err)
	}
	op.must(b, "deploy", "-f", f, "-y", "--json")
	// Let the deploy's aftermath (pointer moves, ingress reloads, first
	// metrics and log scrapes) settle before the window opens.
	time.Sleep(10 * time.Second)
	b.ResetTimer()
	var maxCPU, maxPSS, sumCPU, sumPSS float64
	for range b.N {
		before := map[string]idleSample{}
		for _, m := range l.Machines {
			before[m.Name] = sampleIdle(ctx, b, l, m.Name)
		}
		start := time.Now()
		time.Sleep(idleWindow)
		window := time.Since(start)
		for _, m := range l.Machines {
			cpu, pss := reportIdle(b, m.Name, before[m.Name], sampleIdle(ctx, b, l, m.Name), window)
			maxCPU, maxPSS = max(maxCPU, cpu), max(maxPSS, pss)
			sumCPU += cpu
			sumPSS += pss
		}
	}
	n := float64(b.N * len(l.Machines))
	b.ReportMetric(maxCPU, "max-cpu-%")
	b.ReportMetric(sumCPU/n, "mean-cpu-%")
	b.ReportMetric(maxPSS, "max-pss-MiB")
	b.ReportMetric(sumPSS/n, "mean-pss-MiB")
	b.Logf("idle Machine, all Ployz processes: worst %.2f%% of a core (goal ≤ %.0f%%), worst %.0f MiB PSS (goal ≤ %d MiB)",
		maxCPU, idleCPUGoal, maxPSS, idlePSSGoal)
}

// sampleIdle reads every Ployz process of Machine m.
func sampleIdle(ctx context.Context, b *testing.B, l *lab.Lab, m string) idleSample {
	out, err := l.Exec(ctx, m, "sh", "-c", idleSampleScript)
	if err != nil {
		b.Fatalf("sample %s: %v", m, err)
	}
	s, err := parseIdleSample(out)
	if err != nil {
		b.Fatalf("sample %s: %v", m, err)
	}
	return s
}

// parseIdleSample reads idleSampleScript's output.
func parseIdleSample(out string) (idleSample, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s := idleSample{procs: map[int]idleProc{}}
	if _, err := fmt.Sscan(lines[0], &s.hz); err != nil || s.hz <= 0 {
		return s, fmt.Errorf("clock ticks %q: %v", lines[0], err)
	}
	for _, line := range lines[1:] {
		var p idleProc
		var pid int
		if _, err := fmt.Sscan(line, &p.unit, &pid, &p.ticks, &p.pssKiB); err != nil {
			return s, fmt.Errorf("process line %q: %w", line, err)
		}
		p.unit = strings.TrimSuffix(p.unit, ".service")
		s.procs[pid] = p
	}
	return s, nil
}

// reportIdle logs Machine m's per-unit CPU and PSS over the window and
// returns its totals (% of a core, MiB). A process that started during
// the window counts from its start; one that ended is not counted.
func reportIdle(b *testing.B, m string, before, after idleSample, window time.Duration) (cpu, pssMiB float64) {
	type unitCost struct{ cpu, pss float64 }
	per := map[string]*unitCost{}
	for pid, p := range after.procs {
		u := per[p.unit]
		if u == nil {
			u = &unitCost{}
			per[p.unit] = u
		}
		used := p.ticks - before.procs[pid].ticks
		if was, ok := before.procs[pid]; !ok || was.unit != p.unit {
			used = p.ticks
		}
		u.cpu += 100 * float64(used) / float64(after.hz) / window.Seconds()
		u.pss += float64(p.pssKiB) / 1024
	}
	units := make([]string, 0, len(per))
	for u := range per {
		units = append(units, u)
	}
	sort.Strings(units)
	var parts []string
	for _, u := range units {
		c := per[u]
		cpu += c.cpu
		pssMiB += c.pss
		parts = append(parts, fmt.Sprintf("%s %.2f%% %.1f MiB", u, c.cpu, c.pss))
	}
	b.Logf("%s idle over %s: total %.2f%% of a core (goal ≤ %.0f%%), %.1f MiB PSS (goal ≤ %d MiB): %s",
		m, window.Round(time.Second), cpu, idleCPUGoal, pssMiB, idlePSSGoal, strings.Join(parts, "; "))
	return cpu, pssMiB
}
