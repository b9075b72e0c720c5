package pluginhost_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/internal/prereq"
)

// TestIdleCPU measures (PLOYZ_MEASURE_IDLE=1; printed, not gated) what
// watching one idle long-lived plugin costs over 20 s: this process (the
// host) by getrusage and the plugin's process by /proc/PID/stat, with
// the health check and Info call every 2 s (the default before the
// watch woke on a dropped connection) against DefaultHealthInterval.
func TestIdleCPU(t *testing.T) {
	if os.Getenv("PLOYZ_MEASURE_IDLE") == "" {
		prereq.Skip(t, "a 40 s measurement, printed and never gating: set PLOYZ_MEASURE_IDLE=1")
	}
	for _, mode := range []struct {
		name     string
		interval time.Duration
	}{{"health check every 2s", 2 * time.Second}, {"DefaultHealthInterval", 0}} {
		dir := t.TempDir()
		install(t, dir, bins.lived, "lived", pluginhost.LifecycleLongLived)
		h := newHost(t, dir, func(c *pluginhost.Config) { c.LaunchLongLived, c.HealthInterval = true, mode.interval })
		pid := statusOf(t, h, "lived").Pid
		time.Sleep(2 * time.Second)
		host0, plug0 := selfCPU(), procCPU(t, pid)
		time.Sleep(20 * time.Second)
		host, plug := selfCPU()-host0, procCPU(t, pid)-plug0
		h.Close()
		_ = syscall.Kill(pid, syscall.SIGTERM)
		t.Logf("%s: host %s, plugin %s CPU in 20 s (%.3f%% and %.3f%% of a core)", mode.name,
			host.Round(time.Millisecond), plug.Round(time.Millisecond), 100*host.Seconds()/20, 100*plug.Seconds()/20)
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the time pid's threads ran on a CPU, from each
// /proc/PID/task/TID/schedstat (in ns, where /proc/PID/stat counts 10 ms
// ticks); threads that ended are not counted.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of pid %d: %v", pid, err)
	}
	var sum time.Duration
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		if ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64); err == nil {
			sum += time.Duration(ns)
		}
	}
	return sum
}
