package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ployz/ployz/sdk/observe"
)

// Metric names. Counters are stored as per-second rates over the tick.
const (
	MetricCPU      = "cpu.cores"        // CPU time per second (1 = one core busy)
	MetricMem      = "mem.bytes"        // memory in use, page cache that can be dropped excluded
	MetricPids     = "pids"             // tasks
	MetricIORead   = "io.read_bytes_s"  // block I/O read per second
	MetricIOWrite  = "io.write_bytes_s" // block I/O written per second
	MetricNetRx    = "net.rx_bytes_s"   // bytes received per second
	MetricNetTx    = "net.tx_bytes_s"   // bytes sent per second
	MetricMemTotal = "mem.total_bytes"  // Machine only
	MetricDiskUsed = "disk.used_bytes"  // Machine only: Docker's filesystem
	MetricDiskFree = "disk.free_bytes"  // Machine only
	MetricObserve  = "observe.bytes"    // Machine only: the Observe Store's size
)

// metricIDs numbers metrics on disk; entries are only appended.
var metricIDs = []string{MetricCPU, MetricMem, MetricPids, MetricIORead, MetricIOWrite, MetricNetRx, MetricNetTx,
	MetricMemTotal, MetricDiskUsed, MetricDiskFree, MetricObserve}

func metricID(name string) (byte, bool) {
	for i, m := range metricIDs {
		if m == name {
			return byte(i), true
		}
	}
	return 0, false
}

// Sys locates what the collector reads; tests point it at a fake tree.
type Sys struct {
	Proc       string // /proc
	Cgroup     string // /sys/fs/cgroup
	Containers string // Docker's <root>/containers
	DiskPath   string // the filesystem whose use is reported (Docker's root)
}

// Subject is whose values a sample holds: the Machine or one Container.
type Subject struct {
	Container  string `json:"container,omitempty"` // id; empty for the Machine
	Name       string `json:"name,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Service    string `json:"service,omitempty"`
	Deployment string `json:"deployment,omitempty"`
}

// Key names the subject on disk.
func (s Subject) Key() string {
	if s.Container == "" {
		return "machine"
	}
	return "c-" + s.Container
}

// Value is one metric of one subject at a tick; Gap, when set, says why
// it could not be read (and Value means nothing).
type Value struct {
	Metric string
	Value  float64
	Gap    string
}

// Tick is what one collection read.
type Tick struct {
	Time     time.Time
	Subjects map[string]Subject // by Key
	Values   map[string][]Value // by subject Key
	Markers  []Marker
	// Counters are ployzd's (observe.Counters), served on the Prometheus
	// endpoint only; CountersGap says why they could not be read.
	Counters    observe.Counters
	CountersGap string
}

// counters are the raw cumulative readings rates are computed from.
type counters struct {
	at                    time.Time
	cpu, rd, wr, rx, tx   float64
	hasCPU, hasIO, hasNet bool
}

// Collector reads samples; it keeps the previous counters for rates.
type Collector struct {
	Sys    Sys
	prev   map[string]counters
	life   map[string]lifecycle
	deps   map[string]bool // namespace/service/deployment seen
	listed map[string]bool // Ployz Containers of the current scan, running or not
	ready  bool            // a first scan was made: what it finds is not "new"
	// ObserveBytes, when set, reports the Observe Store's size (read on
	// its own tick: a Slow source).
	ObserveBytes func() (float64, error)
	// Counters, when set, reads ployzd's counters file.
	Counters func() (observe.Counters, error)
}

// dockerState is the part of config.v2.json the collector reads.
type dockerState struct {
	ID     string `json:"ID"`
	Name   string `json:"Name"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	State struct {
		Running   bool   `json:"Running"`
		Pid       int    `json:"Pid"`
		OOMKilled bool   `json:"OOMKilled"`
		ExitCode  int    `json:"ExitCode"`
		StartedAt string `json:"StartedAt"`
	} `json:"State"`
	RestartCount int `json:"RestartCount"`
}

// Collect reads one tick at now.
func (c *Collector) Collect(now time.Time) Tick {
	if c.prev == nil {
		c.prev = map[string]counters{}
	}
	t := Tick{Time: now, Subjects: map[string]Subject{}, Values: map[string][]Value{}}
	m := Subject{}
	t.Subjects[m.Key()] = m
	t.Values[m.Key()] = c.machine(now)
	es, _ := os.ReadDir(c.Sys.Containers)
	seen := map[string]bool{"machine": true}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(c.Sys.Containers, e.Name(), "config.v2.json"))
		if err != nil {
			continue
		}
		var ds dockerState
		if json.Unmarshal(b, &ds) != nil || ds.Config.Labels["ployz.namespace"] == "" {
			continue
		}
		l := ds.Config.Labels
		s := Subject{Container: ds.ID, Name: strings.TrimPrefix(ds.Name, "/"), Namespace: l["ployz.namespace"],
			Service: l["ployz.service"], Deployment: l["ployz.deployment"]}
		t.Markers = append(t.Markers, c.lifecycle(now.UnixNano(), s, ds)...)
		if !ds.State.Running || ds.State.Pid <= 0 {
			continue
		}
		t.Subjects[s.Key()] = s
		t.Values[s.Key()] = c.container(s.Key(), ds.State.Pid, now)
		seen[s.Key()] = true
	}
	for k := range c.prev {
		if !seen[k] {
			delete(c.prev, k)
		}
	}
	for k := range c.life {
		if _, ok := t.Subjects[k]; !ok && !c.listed[k] {
			delete(c.life, k) // removed from Docker
		}
	}
	c.listed = nil
	c.ready = true
	if c.Counters != nil {
		var err error
		if t.Counters, err = c.Counters(); err != nil {
			t.CountersGap = err.Error()
		}
	}
	return t
}

// lifecycle notes s's state and returns the markers since the last tick.
// What the first scan finds is the starting point, not events.
func (c *Collector) lifecycle(now int64, s Subject, ds dockerState) []Marker {
	if c.life == nil {
		c.life, c.deps = map[string]lifecycle{}, map[string]bool{}
	}
	cur := lifecycle{running: ds.State.Running, startedAt: ds.State.StartedAt, restarts: ds.RestartCount}
	prev, had := c.life[s.Key()]
	c.life[s.Key()] = cur
	if c.listed == nil {
		c.listed = map[string]bool{}
	}
	c.listed[s.Key()] = true
	dep := s.Namespace + "/" + s.Service + "/" + s.Deployment
	deployNew := !c.deps[dep] && s.Deployment != ""
	c.deps[dep] = true
	if !c.ready {
		return nil
	}
	return markers(now, s, prev, had, cur, ds.State.OOMKilled, ds.State.ExitCode, deployNew)
}

func gap(metric string, err error) Value { return Value{Metric: metric, Gap: err.Error()} }

// rate turns a counter into a per-second value against the previous
// tick; the first tick of a subject has none (no value, not a gap).
func rate(out []Value, metric string, cur, prev float64, ok bool, dt float64) []Value {
	if !ok || dt <= 0 {
		return out
	}
	if cur < prev { // the counter was reset (a restarted Container)
		return append(out, Value{Metric: metric, Gap: "counter reset"})
	}
	return append(out, Value{Metric: metric, Value: (cur - prev) / dt})
}

func (c *Collector) container(key string, pid int, now time.Time) []Value {
	var out []Value
	cg, err := readCgroups(filepath.Join(c.Sys.Proc, strconv.Itoa(pid), "cgroup"))
	prev, had := c.prev[key]
	cur := counters{at: now}
	dt := now.Sub(prev.at).Seconds()
	if err != nil {
		for _, m := range []string{MetricCPU, MetricMem, MetricPids, MetricIORead, MetricIOWrite} {
			out = append(out, gap(m, err))
		}
	} else {
		if v, err := c.cpuSeconds(cg); err != nil {
			out = append(out, gap(MetricCPU, err))
		} else {
			cur.cpu, cur.hasCPU = v, true
			out = rate(out, MetricCPU, v, prev.cpu, had && prev.hasCPU, dt)
		}
		if v, err := c.memBytes(cg); err != nil {
			out = append(out, gap(MetricMem, err))
		} else {
			out = append(out, Value{Metric: MetricMem, Value: v})
		}
		if v, err := c.pids(cg); err != nil {
			out = append(out, gap(MetricPids, err))
		} else {
			out = append(out, Value{Metric: MetricPids, Value: v})
		}
		if rd, wr, err := c.ioBytes(cg); err != nil {
			out = append(out, gap(MetricIORead, err), gap(MetricIOWrite, err))
		} else {
			cur.rd, cur.wr, cur.hasIO = rd, wr, true
			out = rate(out, MetricIORead, rd, prev.rd, had && prev.hasIO, dt)
			out = rate(out, MetricIOWrite, wr, prev.wr, had && prev.hasIO, dt)
		}
	}
	if rx, tx, err := netDev(filepath.Join(c.Sys.Proc, strconv.Itoa(pid), "net", "dev"), nil); err != nil {
		out = append(out, gap(MetricNetRx, err), gap(MetricNetTx, err))
	} else {
		cur.rx, cur.tx, cur.hasNet = rx, tx, true
		out = rate(out, MetricNetRx, rx, prev.rx, had && prev.hasNet, dt)
		out = rate(out, MetricNetTx, tx, prev.tx, had && prev.hasNet, dt)
	}
	c.prev[key] = cur
	return out
}

// cgroups is a process's cgroup membership: v1 paths by controller, and
// the v2 (unified) path.
type cgroups struct {
	v1      map[string]string
	unified string
	hasV2   bool
}

func readCgroups(path string) (cgroups, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cgroups{}, fmt.Errorf("container process: %w", err)
	}
	cg := cgroups{v1: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			cg.unified, cg.hasV2 = parts[2], true
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			cg.v1[ctl] = parts[2]
		}
	}
	return cg, nil
}

// v1 reports whether the resource controllers are cgroup v1 (a hybrid
// host keeps only systemd's tree on v2).
func (cg cgroups) isV1() bool { _, ok := cg.v1["memory"]; return ok }

// v1File is <cgroup>/<controller dir>/<path>/<file>; the controller's
// directory may be shared ("cpu,cpuacct").
func (c *Collector) v1File(cg cgroups, ctl, file string) string {
	dir := ctl
	for _, d := range []string{ctl, "cpu,cpuacct", "cpuacct,cpu"} {
		if _, err := os.Stat(filepath.Join(c.Sys.Cgroup, d)); err == nil {
			dir = d
			break
		}
	}
	return filepath.Join(c.Sys.Cgroup, dir, cg.v1[ctl], file)
}

func (c *Collector) v2File(cg cgroups, file string) string {
	return filepath.Join(c.Sys.Cgroup, cg.unified, file)
}

func (c *Collector) cpuSeconds(cg cgroups) (float64, error) {
	if cg.isV1() {
		v, err := readUint(c.v1File(cg, "cpuacct", "cpuacct.usage"))
		return float64(v) / 1e9, err
	}
	kv, err := readKV(c.v2File(cg, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	us, ok := kv["usage_usec"]
	if !ok {
		return 0, fmt.Errorf("%s: no usage_usec", c.v2File(cg, "cpu.stat"))
	}
	return float64(us) / 1e6, nil
}

// memBytes is usage minus inactive page cache, as `docker stats` shows.
func (c *Collector) memBytes(cg cgroups) (float64, error) {
	var usage uint64
	var stat map[string]uint64
	var err error
	inactive := "inactive_file"
	if cg.isV1() {
		if usage, err = readUint(c.v1File(cg, "memory", "memory.usage_in_bytes")); err != nil {
			return 0, err
		}
		stat, err = readKV(c.v1File(cg, "memory", "memory.stat"))
		inactive = "total_inactive_file"
	} else {
		if usage, err = readUint(c.v2File(cg, "memory.current")); err != nil {
			return 0, err
		}
		stat, err = readKV(c.v2File(cg, "memory.stat"))
	}
	if err == nil && stat[inactive] < usage {
		usage -= stat[inactive]
	}
	return float64(usage), nil
}

func (c *Collector) pids(cg cgroups) (float64, error) {
	path := c.v2File(cg, "pids.current")
	if cg.isV1() {
		path = c.v1File(cg, "pids", "pids.current")
	}
	v, err := readUint(path)
	return float64(v), err
}

func (c *Collector) ioBytes(cg cgroups) (rd, wr float64, err error) {
	if cg.isV1() {
		b, err := os.ReadFile(c.v1File(cg, "blkio", "blkio.throttle.io_service_bytes"))
		if err != nil {
			return 0, 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				continue
			}
			v, _ := strconv.ParseFloat(f[2], 64)
			switch f[1] {
			case "Read":
				rd += v
			case "Write":
				wr += v
			}
		}
		return rd, wr, nil
	}
	b, err := os.ReadFile(c.v2File(cg, "io.stat"))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range strings.Fields(line)[min(1, len(strings.Fields(line))):] {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "rbytes":
				rd += n
			case "wbytes":
				wr += n
			}
		}
	}
	return rd, wr, nil
}

// netDev sums received and sent bytes over the interfaces of a network
// namespace's /proc/<pid>/net/dev, except loopback and those skip names.
func netDev(path string, skip func(string) bool) (rx, tx float64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		name = strings.TrimSpace(name)
		if !ok || name == "lo" || (skip != nil && skip(name)) {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			continue
		}
		r, _ := strconv.ParseFloat(f[0], 64)
		t, _ := strconv.ParseFloat(f[8], 64)
		rx, tx = rx+r, tx+t
	}
	return rx, tx, nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

func readKV(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// userHZ is the kernel's clock tick for /proc/stat (100 on Linux).
const userHZ = 100

func (c *Collector) machine(now time.Time) []Value {
	var out []Value
	prev, had := c.prev["machine"]
	cur := counters{at: now}
	dt := now.Sub(prev.at).Seconds()
	if busy, err := procStatBusy(filepath.Join(c.Sys.Proc, "stat")); err != nil {
		out = append(out, gap(MetricCPU, err))
	} else {
		cur.cpu, cur.hasCPU = busy/userHZ, true
		out = rate(out, MetricCPU, cur.cpu, prev.cpu, had && prev.hasCPU, dt)
	}
	if kv, err := readMeminfo(filepath.Join(c.Sys.Proc, "meminfo")); err != nil {
		out = append(out, gap(MetricMem, err), gap(MetricMemTotal, err))
	} else {
		out = append(out, Value{Metric: MetricMem, Value: float64(kv["MemTotal"]-kv["MemAvailable"]) * 1024},
			Value{Metric: MetricMemTotal, Value: float64(kv["MemTotal"]) * 1024})
	}
	virtual := func(n string) bool {
		for _, p := range []string{"veth", "docker", "br-"} {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
		return false
	}
	if rx, tx, err := netDev(filepath.Join(c.Sys.Proc, "net", "dev"), virtual); err != nil {
		out = append(out, gap(MetricNetRx, err), gap(MetricNetTx, err))
	} else {
		cur.rx, cur.tx, cur.hasNet = rx, tx, true
		out = rate(out, MetricNetRx, rx, prev.rx, had && prev.hasNet, dt)
		out = rate(out, MetricNetTx, tx, prev.tx, had && prev.hasNet, dt)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(c.Sys.DiskPath, &fs); err != nil {
		out = append(out, gap(MetricDiskUsed, err), gap(MetricDiskFree, err))
	} else {
		out = append(out, Value{Metric: MetricDiskUsed, Value: float64(fs.Blocks-fs.Bfree) * float64(fs.Bsize)},
			Value{Metric: MetricDiskFree, Value: float64(fs.Bavail) * float64(fs.Bsize)})
	}
	if c.ObserveBytes != nil {
		if v, err := c.ObserveBytes(); err != nil {
			out = append(out, gap(MetricObserve, err))
		} else {
			out = append(out, Value{Metric: MetricObserve, Value: v})
		}
	}
	c.prev["machine"] = cur
	return out
}

func procStatBusy(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, fmt.Errorf("%s: no cpu line", path)
	}
	var busy float64
	for i, s := range f[1:] {
		v, _ := strconv.ParseFloat(s, 64)
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is in user already
			continue
		}
		busy += v
	}
	return busy, nil
}

func readMeminfo(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) > 0 {
			n, _ := strconv.ParseUint(f[0], 10, 64)
			out[k] = n
		}
	}
	if out["MemTotal"] == 0 {
		return nil, fmt.Errorf("%s: no MemTotal", path)
	}
	return out, nil
}
