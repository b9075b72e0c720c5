package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
	"github.com/ployz/ployz/core/store/gossip"
	"github.com/ployz/ployz/core/store/schema"
	"github.com/ployz/ployz/core/store/server"
)

// The scale harness (issue 49) runs a Cluster's stores in this process:
// N store nodes with the gossip and sync timers a Machine uses, the
// Cluster's gossip key, and a simulated network (gossip.Faults) that
// delays every message and may drop some. Synthetic Container rows stand
// in for what each Machine's ployzd writes. No Docker, no namespaces, so
// 100 Machines fit on a 2-core host; the price is that every node shares
// the host's CPU, so its latencies include waiting for a core.

// scaleConfig is one run of the harness.
type scaleConfig struct {
	Nodes  int
	Rows   int           // synthetic Container rows written before the catch-up
	Writes int           // timed writes (write → visible everywhere)
	Rest   time.Duration // the at-rest window traffic and CPU are read over
	// Latency ± Jitter delays every message one way; Loss drops that
	// fraction of packets and stream dials.
	Latency, Jitter time.Duration
	Loss            float64
}

// scaleResult is what one run measured.
type scaleResult struct {
	Form       time.Duration // until every node saw every other up
	Load       time.Duration // Rows written and applied everywhere
	Visible    []time.Duration
	WriteCPU   time.Duration // per timed write per node, beyond the at-rest rate: what one write costs a Machine
	WireBps    float64       // per node at rest: every byte on the gossip transport
	StoreBps   float64       // per node at rest: the store's own messages
	SyncReqBps float64       // of which anti-entropy requests
	CPU        float64       // per node at rest, fraction of one core (process total / N)
	RSS        uint64        // per node: process RSS growth / N
	Heap       uint64        // per node: Go heap in use growth / N
	CatchUp    time.Duration
	DownFirst  time.Duration // a stopped node: first Down verdict
	DownAll    time.Duration // every other node's Down verdict
	// During the load, per node: bytes of changes pushed (broadcast) and
	// sent in answer to anti-entropy requests (repairs of what a push
	// did not deliver), and CPU per row written.
	LoadBroadcast int64
	LoadAnswers   int64
	LoadCPU       time.Duration
}

// scaleNode is one store node and the visibility probe on its commits.
type scaleNode struct {
	n    *server.Node
	site string
}

// scaleCluster is the running nodes.
type scaleCluster struct {
	tb     testing.TB
	cfg    scaleConfig
	dir    string
	faults *gossip.Faults
	nodes  []*scaleNode
	probe  *visProbe
}

var scaleKey = []byte("scale-harness-gossip-key-32bytes")

func startScaleCluster(tb testing.TB, cfg scaleConfig) *scaleCluster {
	tb.Helper()
	c := &scaleCluster{tb: tb, cfg: cfg, dir: tb.TempDir(), faults: gossip.NewFaults(time.Now().UnixNano()), probe: &visProbe{}}
	c.faults.SetLatency(cfg.Latency, cfg.Jitter)
	if cfg.Loss > 0 {
		c.faults.SetLoss(cfg.Loss, 0)
	}
	for i := 0; i < cfg.Nodes; i++ {
		c.nodes = append(c.nodes, c.startNode(i))
	}
	return c
}

// startNode starts node i with the first three nodes as its bootstrap
// peers, as a Machine joins through the Machines it was enrolled by.
func (c *scaleCluster) startNode(i int) *scaleNode {
	c.tb.Helper()
	var boot []string
	for _, sn := range c.nodes[:min(3, len(c.nodes))] {
		boot = append(boot, sn.n.GossipAddr())
	}
	dir := filepath.Join(c.dir, strconv.Itoa(i)) // each node its own dir: peers file
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.tb.Fatal(err)
	}
	n, err := server.Start(context.Background(), server.Config{
		DBPath: filepath.Join(dir, "store.db"), SchemaSQL: schema.SQL(), GossipAddr: "127.0.0.1:0",
		Bootstrap: boot, GossipKey: scaleKey, Faults: c.faults,
	})
	if err != nil {
		c.tb.Fatalf("start store node %d: %v", i, err)
	}
	c.tb.Cleanup(func() { n.Close() })
	sn := &scaleNode{n: n, site: n.Engine().Site()}
	n.OnCommit(c.probe.hook(i))
	return sn
}

// waitFormed waits until every node holds every other node up.
func (c *scaleCluster) waitFormed(timeout time.Duration) time.Duration {
	c.tb.Helper()
	start := time.Now()
	for _, sn := range c.nodes {
		for countUp(sn.n) < len(c.nodes)-1 {
			if time.Since(start) > timeout {
				c.tb.Fatalf("membership of %d nodes did not form in %s: a node sees %d up", len(c.nodes), timeout, countUp(sn.n))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return time.Since(start)
}

// containerRow is a synthetic Container row the size of a real one.
func containerRow(id, owner string) crdt.Stmt {
	body := fmt.Sprintf(`{"namespace":"shop-prod","service":"web","name":"%s","image":"registry.example/shop/web:1.42.0",`+
		`"state":"running","spec_hash":"ps1-0123456789abcdef","deployment_id":"d-abcdef","ip":"10.210.3.17","ports":[{"container":8080,"protocol":"tcp"}],`+
		`"labels":{"ployz.service":"web"},"started_at":"2026-12-06T12:00:00Z"}`, id)
	return crdt.Stmt{Query: `INSERT INTO containers (id, owner, body, updated_at) VALUES (?, ?, ?, ?)`, Args: []any{id, owner, body, time.Now().Unix()}}
}

// load has every node write its share of rows, one transaction per row
// as a ployzd records each Container, all nodes at once, and waits until
// every node holds every version.
func (c *scaleCluster) load(rows int, timeout time.Duration) time.Duration {
	c.tb.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(c.nodes))
	for i, sn := range c.nodes {
		share := rows / len(c.nodes)
		if i < rows%len(c.nodes) {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < share; k++ {
				id := fmt.Sprintf("c-%d-%d", i, k)
				if _, _, err := sn.n.Engine().Exec(context.Background(), []crdt.Stmt{containerRow(id, sn.site)}); err != nil {
					errs <- fmt.Errorf("node %d writes %s: %w", i, id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.tb.Fatal(err)
	}
	c.waitCaughtUp(c.nodes, c.heads(), start, timeout)
	return time.Since(start)
}

// heads is every node's own head version: what a node must hold to be
// caught up with the Cluster.
func (c *scaleCluster) heads() map[string]int64 {
	out := map[string]int64{}
	for _, sn := range c.nodes {
		out[sn.site] = sn.n.Engine().Book().Head(sn.site)
	}
	return out
}

func (c *scaleCluster) waitCaughtUp(nodes []*scaleNode, target map[string]int64, start time.Time, timeout time.Duration) {
	c.tb.Helper()
	for _, sn := range nodes {
		for !sn.n.CaughtUp(target) {
			if time.Since(start) > timeout {
				c.tb.Fatalf("node %s did not catch up in %s (book lacks %d versions)", sn.site[:8], timeout, lacking(sn.n.Engine().Book(), target))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func lacking(b crdt.Book, target map[string]int64) int64 {
	var n int64
	for site, v := range target {
		n += max(0, v-b.Head(site))
	}
	return n
}

// visible writes one row through node i%N and returns how long until
// every node has applied it.
func (c *scaleCluster) visible(i int, timeout time.Duration) time.Duration {
	c.tb.Helper()
	sn := c.nodes[i%len(c.nodes)]
	id := "probe-" + strconv.Itoa(i)
	done := c.probe.arm(`["`+id+`"]`, len(c.nodes))
	start := time.Now()
	if _, _, err := sn.n.Engine().Exec(context.Background(), []crdt.Stmt{containerRow(id, sn.site)}); err != nil {
		c.tb.Fatalf("write %s: %v", id, err)
	}
	select {
	case <-done:
	case <-time.After(timeout):
		c.tb.Fatalf("%s not applied on every node within %s (%d of %d)", id, timeout, c.probe.count(), len(c.nodes))
	}
	return time.Since(start)
}

// usage is the process's CPU time and the Cluster's traffic at one moment.
type usage struct {
	at      time.Time
	cpu     time.Duration
	traffic server.Traffic
}

func (c *scaleCluster) usage() usage {
	u := usage{at: time.Now(), cpu: processCPU()}
	for _, sn := range c.nodes {
		t := sn.n.Traffic()
		u.traffic.Wire.PacketBytes += t.Wire.PacketBytes
		u.traffic.Wire.StreamBytes += t.Wire.StreamBytes
		u.traffic.Broadcast += t.Broadcast
		u.traffic.SyncRequests += t.SyncRequests
		u.traffic.SyncAnswers += t.SyncAnswers
	}
	return u
}

// rest reads traffic and CPU per node over the at-rest window.
func (c *scaleCluster) rest(r *scaleResult) {
	a := c.usage()
	time.Sleep(c.cfg.Rest)
	b := c.usage()
	per := float64(len(c.nodes)) * b.at.Sub(a.at).Seconds()
	r.WireBps = float64(b.traffic.Wire.Total()-a.traffic.Wire.Total()) / per
	r.StoreBps = float64(b.traffic.Store()-a.traffic.Store()) / per
	r.SyncReqBps = float64(b.traffic.SyncRequests-a.traffic.SyncRequests) / per
	r.CPU = (b.cpu - a.cpu).Seconds() / per
}

// catchUp starts one more node and times it until it holds every version
// the Cluster has.
func (c *scaleCluster) catchUp(timeout time.Duration) time.Duration {
	c.tb.Helper()
	target := c.heads()
	start := time.Now()
	sn := c.startNode(len(c.nodes))
	c.waitCaughtUp([]*scaleNode{sn}, target, start, timeout)
	d := time.Since(start)
	c.nodes = append(c.nodes, sn)
	return d
}

// down stops node 1 as a crash would and times the other nodes' Down
// verdicts: the first, and the last.
func (c *scaleCluster) down(timeout time.Duration) (first, all time.Duration) {
	c.tb.Helper()
	victim := c.nodes[1]
	others := slices.Delete(slices.Clone(c.nodes), 1, 2)
	start := time.Now()
	if err := victim.n.Close(); err != nil {
		c.tb.Fatalf("stop node: %v", err)
	}
	verdict := make([]bool, len(others))
	left := len(others)
	for left > 0 {
		if time.Since(start) > timeout {
			c.tb.Fatalf("%d of %d nodes still hold the stopped node up after %s", left, len(others), timeout)
		}
		for i, sn := range others {
			if !verdict[i] && stateOf(sn.n, victim.site) == "down" {
				verdict[i] = true
				left--
				if first == 0 {
					first = time.Since(start)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return first, time.Since(start)
}

func stateOf(n *server.Node, site string) string {
	for _, m := range n.Members() {
		if m.Name == site {
			return m.State
		}
	}
	return ""
}

// runScale runs every phase in order: form, load the rows, rest, timed
// writes, a new node's catch-up, a node's Down verdict.
func runScale(tb testing.TB, cfg scaleConfig) scaleResult {
	tb.Helper()
	runtime.GC()
	rss0, heap0 := processRSS(), heapInUse()
	var r scaleResult
	c := startScaleCluster(tb, cfg)
	r.Form = c.waitFormed(time.Duration(cfg.Nodes)*time.Second + 30*time.Second)
	u0 := c.usage()
	r.Load = c.load(cfg.Rows, 5*time.Minute)
	u1 := c.usage()
	r.LoadBroadcast = (u1.traffic.Broadcast - u0.traffic.Broadcast) / int64(cfg.Nodes)
	r.LoadAnswers = (u1.traffic.SyncAnswers - u0.traffic.SyncAnswers) / int64(cfg.Nodes)
	r.LoadCPU = (u1.cpu - u0.cpu) / time.Duration(cfg.Rows*cfg.Nodes)
	time.Sleep(3 * time.Second) // last sync rounds and queued messages drain
	c.rest(&r)
	runtime.GC()
	r.RSS = (processRSS() - min(rss0, processRSS())) / uint64(cfg.Nodes)
	r.Heap = (heapInUse() - min(heap0, heapInUse())) / uint64(cfg.Nodes)
	start, cpu0 := time.Now(), processCPU()
	for i := 0; i < cfg.Writes; i++ {
		r.Visible = append(r.Visible, c.visible(i, 30*time.Second))
	}
	r.WriteCPU = r.writeCPU(processCPU()-cpu0, time.Since(start), cfg)
	r.CatchUp = c.catchUp(2 * time.Minute)
	r.DownFirst, r.DownAll = c.down(2 * time.Minute)
	return r
}

// writeCPU spreads the CPU the timed writes used over writes and nodes,
// after taking off what the nodes would have used at rest meanwhile
// (gossip, probes, sync rounds), so it is what writing costs.
func (r scaleResult) writeCPU(used, took time.Duration, cfg scaleConfig) time.Duration {
	idle := time.Duration(r.CPU * float64(cfg.Nodes) * float64(took))
	return max(0, used-idle) / time.Duration(cfg.Writes*cfg.Nodes)
}

// visProbe records, for one row at a time, which nodes have applied it.
type visProbe struct {
	mu   sync.Mutex
	pk   string
	seen map[int]bool
	want int
	done chan struct{}
}

// arm starts watching for pk on want nodes; the channel closes once all
// have committed it.
func (p *visProbe) arm(pk string, want int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pk, p.seen, p.want, p.done = pk, map[int]bool{}, want, make(chan struct{})
	return p.done
}

func (p *visProbe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

// hook is node i's commit hook: it marks i when a commit carries pk.
func (p *visProbe) hook(i int) func(crdt.Commit) {
	return func(cm crdt.Commit) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.pk == "" || p.seen[i] || !carries(cm, p.pk) {
			return
		}
		p.seen[i] = true
		if len(p.seen) == p.want {
			close(p.done)
		}
	}
}

func carries(cm crdt.Commit, pk string) bool {
	for _, cs := range cm.Changesets {
		for _, ch := range cs.Changes {
			if ch.Table == "containers" && ch.PK == pk {
				return true
			}
		}
	}
	return false
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processRSS is the resident set from /proc (0 where there is none). The
// SQLite driver allocates outside the Go heap, so RSS is the total.
func processRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// loadAverage is the host's 1-minute load average, for the log.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func (r scaleResult) quantile(q int) time.Duration {
	s := slices.Clone(r.Visible)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*q/100)]
}

// String is one line of the curve.
func (r scaleResult) String() string {
	return fmt.Sprintf("form %.1fs, load %.1fs (per node: %d KB pushed, %d KB of sync answers; CPU per row per node %.2fms), visible p50 %.1fms p99 %.1fms (CPU per write per node %.2fms), at rest per node: %.0f B/s on the wire (store %.0f, of which sync requests %.0f), "+
		"CPU %.2f%% of a core, RSS %.1f MB, Go heap %.1f MB; catch-up %.1fs; Down first %.1fs, all %.1fs",
		r.Form.Seconds(), r.Load.Seconds(), r.LoadBroadcast>>10, r.LoadAnswers>>10, ms(r.LoadCPU), ms(r.quantile(50)), ms(r.quantile(99)), ms(r.WriteCPU), r.WireBps, r.StoreBps, r.SyncReqBps,
		100*r.CPU, float64(r.RSS)/(1<<20), float64(r.Heap)/(1<<20), r.CatchUp.Seconds(), r.DownFirst.Seconds(), r.DownAll.Seconds())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
