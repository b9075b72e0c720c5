package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/store/crdt"
	"github.com/ployz/ployz/core/store/gossip"
)

const testSchemaSQL = `
CREATE TABLE kv (k TEXT PRIMARY KEY NOT NULL, v TEXT NOT NULL DEFAULT '', n INTEGER);
CREATE INDEX kv_v ON kv(v);
`

// productionTimers runs the clusters with the gossip and sync timers a
// Machine uses (STORE_TEST_PRODUCTION_TIMERS=1) instead of the short test
// ones, so production settings are exercised outside the lab too.
var productionTimers = os.Getenv("STORE_TEST_PRODUCTION_TIMERS") != ""

// detectWait is a wait that rides on failure detection, stretched under
// production timers: SWIM probes every second there instead of every
// 200ms, so a member is marked down about five times later (measured: 7s
// instead of 1.5s on a loaded 2-core box).
func detectWait(d time.Duration) time.Duration {
	if productionTimers {
		return 3 * d
	}
	return d
}

// testGossipKey is the Cluster key every test cluster shares.
var testGossipKey = []byte("0123456789abcdef0123456789abcdef")

func testLogger() hclog.Logger {
	lvl := hclog.Off
	if os.Getenv("STORE_TEST_LOG") != "" {
		lvl = hclog.LevelFromString(os.Getenv("STORE_TEST_LOG"))
	}
	return hclog.New(&hclog.LoggerOptions{Level: lvl, Output: os.Stderr})
}

// testCluster is N in-process nodes on loopback sharing one fault injector.
type testCluster struct {
	t      *testing.T
	dir    string
	faults *gossip.Faults
	mu     sync.RWMutex
	nodes  []*Node
	addrs  []string
	locks  []sync.RWMutex // writers hold R, restarts hold W
	extra  func(i int, c *Config)

	capMu    sync.Mutex
	captured []crdt.Changeset // every local changeset, for the model
}

func newTestCluster(t *testing.T, n int, seed int64, extra func(i int, c *Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, dir: t.TempDir(), faults: gossip.NewFaults(seed), nodes: make([]*Node, n),
		addrs: make([]string, n), locks: make([]sync.RWMutex, n), extra: extra}
	for i := 0; i < n; i++ {
		c.start(i)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd != nil {
				nd.Close()
			}
		}
	})
	return c
}

func (c *testCluster) config(i int) Config {
	bind := c.addrs[i]
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	var boot []string
	for j, a := range c.addrs {
		if j != i && a != "" {
			boot = append(boot, a)
		}
	}
	cfg := Config{
		DBPath:       filepath.Join(c.dir, "node"+strconv.Itoa(i), "store.db"),
		SchemaSQL:    testSchemaSQL,
		GossipAddr:   bind,
		GossipKey:    testGossipKey,
		Bootstrap:    boot,
		SyncInterval: 100 * time.Millisecond,
		Fast:         true,
		Faults:       c.faults,
		Log:          testLogger().Named("node" + strconv.Itoa(i)),
	}
	if productionTimers {
		cfg.Fast, cfg.SyncInterval = false, 0
	}
	if c.extra != nil {
		c.extra(i, &cfg)
	}
	return cfg
}

func (c *testCluster) start(i int) {
	c.t.Helper()
	cfg := c.config(i)
	if err := os.MkdirAll(filepath.Dir(cfg.DBPath), 0o755); err != nil {
		c.t.Fatal(err)
	}
	n, err := Start(context.Background(), cfg)
	if err != nil {
		c.t.Fatalf("start node %d: %v", i, err)
	}
	n.OnCommit(func(cm crdt.Commit) {
		if cm.Local {
			c.capMu.Lock()
			c.captured = append(c.captured, cm.Changesets...)
			c.capMu.Unlock()
		}
	})
	c.mu.Lock()
	c.nodes[i] = n
	c.addrs[i] = n.GossipAddr()
	c.mu.Unlock()
}

// restart closes node i as a crash would and reopens it from its files.
func (c *testCluster) restart(i int) {
	c.locks[i].Lock()
	defer c.locks[i].Unlock()
	t0 := time.Now()
	if err := c.node(i).Close(); err != nil {
		c.t.Errorf("close node %d: %v", i, err)
	}
	t1 := time.Now()
	c.start(i)
	if os.Getenv("STORE_TEST_TIMING") != "" { // how long crash-restarts take
		c.t.Logf("restart node %d: close %v start %v", i, t1.Sub(t0), time.Since(t1))
	}
}

func (c *testCluster) node(i int) *Node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.nodes[i]
}

func (c *testCluster) exec(i int, stmts ...crdt.Stmt) error {
	c.locks[i].RLock()
	defer c.locks[i].RUnlock()
	_, _, err := c.node(i).Engine().Exec(context.Background(), stmts)
	return err
}

// dump renders a node's kv table as JSON bytes for byte-wise comparison.
func dumpKV(t *testing.T, n *Node) []byte {
	t.Helper()
	rows, err := n.Engine().ReadDB().Query(`SELECT k, v, n FROM kv ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		var k, v string
		var num any
		if err := rows.Scan(&k, &v, &num); err != nil {
			t.Fatal(err)
		}
		out = append(out, []any{k, v, num})
	}
	b, _ := json.Marshal(out)
	return b
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
