package metrics

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/dockertest"
)

func find(vs []Value, metric string) (Value, bool) {
	for _, v := range vs {
		if v.Metric == metric {
			return v, true
		}
	}
	return Value{}, false
}

// TestCollectRealContainer reads a CPU-burning Container of the Docker
// installed here (cgroup v1 or v2, whichever the host runs) and the
// Machine itself.
func TestCollectRealContainer(t *testing.T) {
	img := dockertest.Image(t)
	dockerRoot := dockertest.Root(t)
	out, err := exec.Command("docker", "run", "-d", "--label", "ployz.namespace=mt-test", "--label", "ployz.service=burn",
		"--label", "ployz.deployment=d1", img, "burn").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	c := &Collector{Sys: Sys{Proc: "/proc", Cgroup: "/sys/fs/cgroup", Containers: filepath.Join(dockerRoot, "containers"), DiskPath: dockerRoot}}
	time.Sleep(500 * time.Millisecond)
	c.Collect(time.Now())
	time.Sleep(2 * time.Second)
	tick := c.Collect(time.Now())
	vs := tick.Values["c-"+id]
	if s := tick.Subjects["c-"+id]; s.Service != "burn" || s.Deployment != "d1" {
		t.Fatalf("subject %+v", s)
	}
	for _, v := range vs {
		if v.Gap != "" {
			t.Errorf("%s: gap %q", v.Metric, v.Gap)
		}
	}
	if v, ok := find(vs, MetricCPU); !ok || v.Value < 0.05 || v.Value > 1.5 { // the host is shared: any real share
		t.Errorf("cpu of a busy loop = %+v, want a share of a core", v)
	}
	if v, ok := find(vs, MetricMem); !ok || v.Value <= 0 {
		t.Errorf("mem = %+v", v)
	}
	if v, ok := find(vs, MetricPids); !ok || v.Value < 1 {
		t.Errorf("pids = %+v", v)
	}
	for _, m := range []string{MetricNetRx, MetricNetTx, MetricIORead, MetricIOWrite} {
		if _, ok := find(vs, m); !ok {
			t.Errorf("%s missing", m)
		}
	}
	mv := tick.Values["machine"]
	for _, m := range []string{MetricCPU, MetricMem, MetricMemTotal, MetricDiskUsed, MetricDiskFree, MetricNetRx} {
		if v, ok := find(mv, m); !ok || v.Gap != "" {
			t.Errorf("machine %s = %+v", m, v)
		}
	}
}

// TestCgroupV2AndGaps reads a fake cgroup v2 tree; a file that is missing
// is a named gap, not a zero.
func TestCgroupV2AndGaps(t *testing.T) {
	dir := t.TempDir()
	w := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)
	}
	w("containers/abc/config.v2.json", `{"ID":"abc","Name":"/web-1","Config":{"Labels":{"ployz.namespace":"p","ployz.service":"web"}},"State":{"Running":true,"Pid":42}}`)
	w("proc/42/cgroup", "0::/system.slice/docker-abc.scope\n")
	w("proc/42/net/dev", "Inter-|\n face |\n    lo: 5 0 0 0 0 0 0 0 5 0\n  eth0: 1000 0 0 0 0 0 0 0 500 0 0 0 0 0 0 0\n")
	cg := "cgroup/system.slice/docker-abc.scope/"
	w(cg+"cpu.stat", "usage_usec 1000000\nuser_usec 1\n")
	w(cg+"memory.current", "5000\n")
	w(cg+"memory.stat", "anon 1\ninactive_file 1000\n")
	w(cg+"io.stat", "8:0 rbytes=100 wbytes=200 rios=1 wios=1\n")
	// no pids.current: a named gap
	w("proc/stat", "cpu 100 0 100 800 0 0 0 0 0 0\n")
	w("proc/meminfo", "MemTotal: 1000 kB\nMemAvailable: 400 kB\n")
	w("proc/net/dev", "")
	c := &Collector{Sys: Sys{Proc: filepath.Join(dir, "proc"), Cgroup: filepath.Join(dir, "cgroup"), Containers: filepath.Join(dir, "containers"), DiskPath: dir}}
	t0 := time.Unix(1000, 0)
	c.Collect(t0)
	w(cg+"cpu.stat", "usage_usec 6000000\n")
	w(cg+"io.stat", "8:0 rbytes=1100 wbytes=200\n")
	w("proc/42/net/dev", "  eth0: 3000 0 0 0 0 0 0 0 500 0 0 0 0 0 0 0\n")
	w("proc/stat", "cpu 300 0 300 1400 0 0 0 0 0 0\n")
	tick := c.Collect(t0.Add(10 * time.Second))
	vs := tick.Values["c-abc"]
	check := func(m string, want float64) {
		t.Helper()
		if v, ok := find(vs, m); !ok || v.Gap != "" || v.Value != want {
			t.Errorf("%s = %+v, want %v", m, v, want)
		}
	}
	check(MetricCPU, 0.5)
	check(MetricMem, 4000)
	check(MetricIORead, 100)
	check(MetricNetRx, 200)
	check(MetricNetTx, 0)
	if v, ok := find(vs, MetricPids); !ok || v.Gap == "" {
		t.Errorf("pids without pids.current = %+v, want a named gap", v)
	}
	if v, _ := find(tick.Values["machine"], MetricCPU); v.Value != 0.4 { // 400 ticks busy in 10 s at 100 Hz
		t.Errorf("machine cpu = %+v", v)
	}
	if v, _ := find(tick.Values["machine"], MetricMem); v.Value != 600*1024 {
		t.Errorf("machine mem = %+v", v)
	}
}

// TestMarkersFromDockerState: the collector notices, from Docker's own
// files, a Container of a new Deployment starting, restarting, and being
// OOM-killed, and the store returns them on the Service's timeline.
func TestMarkersFromDockerState(t *testing.T) {
	dir := t.TempDir()
	w := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)
	}
	state := func(running bool, started string, restarts int, oom bool) string {
		return fmt.Sprintf(`{"ID":"abc","Name":"/web-1","Config":{"Labels":{"ployz.namespace":"p","ployz.service":"web","ployz.deployment":"d2"}},`+
			`"State":{"Running":%t,"Pid":42,"StartedAt":%q,"OOMKilled":%t,"ExitCode":137},"RestartCount":%d}`, running, started, oom, restarts)
	}
	w("proc/stat", "cpu 1 0 1 8 0 0 0 0 0 0\n")
	w("proc/meminfo", "MemTotal: 1000 kB\nMemAvailable: 400 kB\n")
	c := &Collector{Sys: Sys{Proc: filepath.Join(dir, "proc"), Cgroup: filepath.Join(dir, "cgroup"), Containers: filepath.Join(dir, "containers"), DiskPath: dir}}
	s, _ := Open(filepath.Join(dir, "store"))
	t0 := time.Unix(1000, 0)
	kinds := func(tk Tick) string {
		var k []string
		for _, m := range tk.Markers {
			k = append(k, m.Kind)
		}
		return strings.Join(k, ",")
	}
	if tk := c.Collect(t0); kinds(tk) != "" { // the starting point: no events
		t.Fatalf("first scan markers %s", kinds(tk))
	}
	w("containers/abc/config.v2.json", state(true, "T1", 0, false))
	tk := c.Collect(t0.Add(10 * time.Second))
	s.Write(tk)
	if kinds(tk) != "deploy,start" {
		t.Fatalf("new Container of a new Deployment: %s", kinds(tk))
	}
	w("containers/abc/config.v2.json", state(true, "T2", 1, false))
	tk = c.Collect(t0.Add(20 * time.Second))
	s.Write(tk)
	if kinds(tk) != "restart" {
		t.Fatalf("restart: %s", kinds(tk))
	}
	w("containers/abc/config.v2.json", state(false, "T2", 1, true))
	tk = c.Collect(t0.Add(30 * time.Second))
	s.Write(tk)
	if kinds(tk) != "oom_kill" {
		t.Fatalf("oom: %s", kinds(tk))
	}
	res, _ := s.Query(Query{Service: "web", From: t0.UnixNano(), To: t0.Add(time.Minute).UnixNano()}, t0.Add(time.Minute))
	var got []string
	for _, m := range res.Markers {
		got = append(got, m.Kind)
	}
	if strings.Join(got, ",") != "deploy,start,restart,oom_kill" {
		t.Fatalf("markers on web's timeline: %v", got)
	}
}

// TestSlowSourceTimesOutAsANamedGap: a source that blocks past its
// timeout is a named gap, and the sampling loop never waits for it.
func TestSlowSourceTimesOutAsANamedGap(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	s := &Slow{Every: time.Hour, Timeout: 50 * time.Millisecond, Read: func(ctx context.Context) (float64, error) {
		<-block
		return 1, nil
	}}
	if _, err := s.Last(); err == nil {
		t.Fatal("a value before the first reading")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	c := &Collector{Sys: Sys{Proc: t.TempDir(), DiskPath: t.TempDir()}, ObserveBytes: s.Last}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		start := time.Now()
		tk := c.Collect(time.Now())
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a tick waited %v for the slow source", d)
		}
		if v, ok := find(tk.Values["machine"], MetricObserve); ok && strings.Contains(v.Gap, "timed out") {
			return
		}
	}
	t.Fatal("the blocked source never became a named gap")
}
