package deploy

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// BenchmarkExecutorFanout runs the first deploy of BenchmarkPlanScale's
// plan (200 Services × 10 replicas, 2,000 creates spread 20 per Machine)
// through the real Executor and Machine RPC client against 100 simulated
// Machines (fanout_harness_test.go: the entry forwards every step over
// mutual TLS; each Machine waits a 10 ms ± 5 ms round trip plus a
// simulated Docker time). It reports the wall time of the whole
// execution (ns/op), the most Machine calls in flight at once across the
// fleet and on one Machine, the calls per deploy, the create step's
// p50/p99 as the executor timed it, and ideal-s: the wall time if
// nothing but the simulated latencies and the executor's per-Service
// parallelism bound it (so wall/ideal is the fan-out's own overhead),
// and the process's CPU per Machine call. /mtls forwards as a Machine
// does; /plain forwards over plain TCP, the difference being TLS (the
// entry keeps one connection per Machine, so a handshake per Machine and
// record encryption; before kept connections it was a handshake per call).
func BenchmarkExecutorFanout(b *testing.B) {
	for _, tc := range []struct {
		name string
		mtls bool
	}{{"mtls", true}, {"plain", false}} {
		b.Run(tc.name, func(b *testing.B) { benchFanout(b, tc.mtls) })
	}
}

// benchFanout is one BenchmarkExecutorFanout case: mtls is production's
// forwarding; plain forwards over plain TCP (no Machine admission), to
// show what the TLS handshakes cost.
func benchFanout(b *testing.B, mtls bool) {
	a := scaleApp()
	p, err := MakePlan(a, scaleSnapshot(a, nil), PlanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	lat := realisticLatency()
	fl := startFanoutFleet(b, scaleMachines, lat, mtls)
	ex := &Executor{C: fl.entry}
	ideal := idealWall(p, lat, ex.parallelism())
	var o Outcome
	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		o = ex.Run(context.Background(), p)
		if o.Status != "completed" {
			b.Fatalf("deploy %s: %s; first failure: %s", o.Status, statuses(o), firstFailure(o))
		}
	}
	wall := time.Since(start) / time.Duration(b.N)
	cpu := processCPU() - cpu0
	b.StopTimer()
	perCall := cpu / time.Duration(fl.calls.Load())
	p50, p99 := stepPercentiles(o, rpc.CmdCreateContainer)
	b.ReportMetric(float64(fl.all.peak.Load()), "peak-calls")
	b.ReportMetric(float64(fl.machinePeak()), "peak-calls/machine")
	b.ReportMetric(float64(fl.calls.Load())/float64(b.N), "calls/op")
	b.ReportMetric(float64(p50.Microseconds())/1000, "create-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "create-p99-ms")
	b.ReportMetric(ideal.Seconds(), "ideal-s")
	b.ReportMetric(float64(perCall.Microseconds())/1000, "cpu-ms/call")
	b.Logf("%d Services × %d replicas on %d simulated Machines (mtls %v), load average %s: wall %.2fs (%.2f× the ideal %.2fs); peak %d Machine calls in flight, %d on one Machine; %.0f calls; create p50 %v p99 %v; %.1f ms of CPU per call (entry, client and Machine sides together)",
		scaleServices, scaleReplicas, scaleMachines, mtls, loadAverage(), wall.Seconds(), wall.Seconds()/ideal.Seconds(), ideal.Seconds(),
		fl.all.peak.Load(), fl.machinePeak(), float64(fl.calls.Load())/float64(b.N), p50.Round(time.Millisecond), p99.Round(time.Millisecond), float64(perCall.Microseconds())/1000)
}

// idealWall is the execution's wall time if only the mean simulated
// latencies and the per-Service parallelism bounded it: every Service at
// once, each bringing its Machines up par at a time (a Machine's rows one
// after the other), then its pointer's ack wait.
func idealWall(p Plan, lat fanoutLatency, par int) time.Duration {
	row := 0 * time.Second
	for _, a := range upActions(Row{Op: OpCreate}) {
		row += lat.rtt + lat.docker[a.cmd]
	}
	var worst time.Duration
	for _, g := range serviceGroups(p.Rows) {
		per := map[string]int{}
		for _, i := range g.rows {
			per[p.Rows[i].MachineID]++
		}
		most := 0
		for _, n := range per {
			most = max(most, n)
		}
		waves := (len(per) + par - 1) / par
		worst = max(worst, time.Duration(waves*most)*row+lat.ackDelay)
	}
	return worst
}

// firstFailure is the first failed step, for a benchmark's fatal message.
func firstFailure(o Outcome) string {
	for _, s := range o.Steps {
		if s.Status == StepFailed {
			return s.Action + " on " + s.Machine + ": " + s.Error
		}
	}
	return "(none)"
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is /proc/loadavg's three load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
