package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
	"github.com/ployz/ployz/core/store/schema"
	"github.com/ployz/ployz/core/store/server"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// benchPair is a store node and a raw SQLite database with the same schema
// and pragmas on the same disk, so one loop can time both.
type benchPair struct {
	raw *sql.DB
	n   *server.Node
	c   *sdkstore.Client
}

func newBenchPair(b *testing.B) *benchPair {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "raw.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { raw.Close() })
	raw.SetMaxOpenConns(1)
	if _, err := raw.Exec(schema.SQL()); err != nil {
		b.Fatal(err)
	}
	n, err := server.Start(ctx, server.Config{DBPath: filepath.Join(dir, "store.db"), SchemaSQL: schema.SQL(), APIAddr: "127.0.0.1:0", NoAuth: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return &benchPair{raw: raw, n: n, c: sdkstore.New(n.APIAddr())}
}

// timings accumulates per-path durations over one interleaved loop.
type timings map[string]time.Duration

func (t timings) run(name string, f func() error) error {
	start := time.Now()
	err := f()
	t[name] += time.Since(start)
	return err
}

// report prints each path's mean and its throughput relative to raw.
func (t timings) report(b *testing.B, unit string) {
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	for name, d := range t {
		b.ReportMetric(per(d), name+"-ns/"+unit)
		if name != "raw" {
			b.ReportMetric(per(t["raw"])/per(d), name+"/raw")
		}
	}
}

// BenchmarkWriteThroughput compares sequential one-row write transactions
// through the store (engine alone, and a client through the HTTP API)
// with raw SQLite inserts in-process on the same disk and pragmas,
// interleaved in one loop so load on the machine hits all alike.
// "http-floor" is a GET /v1/health round trip: what any API call costs.
func BenchmarkWriteThroughput(b *testing.B) {
	ctx := context.Background()
	p := newBenchPair(b)
	const q = `INSERT INTO containers (id, owner, body, updated_at) VALUES (?, 'm1', '{"state":"running"}', 1)`
	t := timings{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := strconv.Itoa(i)
		err := errors.Join(
			t.run("raw", func() error { _, err := p.raw.Exec(q, "r"+id); return err }),
			t.run("engine", func() error {
				_, _, err := p.n.Engine().Exec(ctx, []crdt.Stmt{{Query: q, Args: []any{"e" + id}}})
				return err
			}),
			t.run("api", func() error { _, err := p.c.Exec(ctx, sdkstore.Stmt(q, "a"+id)); return err }),
			t.run("http-floor", func() error { _, err := p.c.Health(ctx); return err }),
		)
		if err != nil {
			b.Fatal(err)
		}
	}
	t.report(b, "write")
}

// BenchmarkPointQuery compares reading one row by primary key through the
// HTTP API with the same query on raw SQLite in-process, interleaved.
func BenchmarkPointQuery(b *testing.B) {
	ctx := context.Background()
	p := newBenchPair(b)
	const rows = 1000
	const ins = `INSERT INTO containers (id, owner, body, updated_at) VALUES (?, 'm1', '{"state":"running"}', 1)`
	for i := 0; i < rows; i++ {
		if _, err := p.raw.Exec(ins, "c"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := p.n.Engine().Exec(ctx, []crdt.Stmt{{Query: ins, Args: []any{"c" + strconv.Itoa(i)}}}); err != nil {
			b.Fatal(err)
		}
	}
	const q = `SELECT id, owner, body FROM containers WHERE id = ?`
	t := timings{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := "c" + strconv.Itoa(i%rows)
		err := errors.Join(
			t.run("raw", func() error {
				var a, o, bd string
				return p.raw.QueryRow(q, id).Scan(&a, &o, &bd)
			}),
			t.run("api", func() error {
				r, err := p.c.Query(ctx, sdkstore.Stmt(q, id))
				if err == nil && len(r.Rows) != 1 {
					err = fmt.Errorf("point query for %s: %d rows", id, len(r.Rows))
				}
				return err
			}),
			t.run("http-floor", func() error { _, err := p.c.Health(ctx); return err }),
		)
		if err != nil {
			b.Fatal(err)
		}
	}
	t.report(b, "query")
}

// BenchmarkReplicationLatency measures the time from a write on one node
// to the matching subscription event on every node (p50/p99).
func BenchmarkReplicationLatency(b *testing.B) {
	for _, size := range []int{3, 10} {
		b.Run(fmt.Sprintf("%dnodes", size), func(b *testing.B) { benchLatency(b, size) })
	}
}

func benchLatency(b *testing.B, size int) {
	c := startLatencyCluster(b, size, true)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		lat = append(lat, c.write(b, i))
	}
	b.StopTimer()
	b.ReportMetric(quantileMs(lat, 50), "p50-ms")
	b.ReportMetric(quantileMs(lat, 99), "p99-ms")
}

// BenchmarkReplicationAuthOverhead times write→every-node on two 3-node
// clusters in the same loop, one with the store's authentication (API
// token, gossip encrypted and authenticated under the Cluster key) and
// one without (main before issue 12), and prints the p99 ratio. It never
// fails on a number.
func BenchmarkReplicationAuthOverhead(b *testing.B) {
	auth, plain := startLatencyCluster(b, 3, true), startLatencyCluster(b, 3, false)
	la := make([]time.Duration, 0, b.N)
	lp := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		lp = append(lp, plain.write(b, i))
		la = append(la, auth.write(b, i))
	}
	b.StopTimer()
	b.ReportMetric(quantileMs(lp, 99), "plain-p99-ms")
	b.ReportMetric(quantileMs(la, 99), "auth-p99-ms")
	b.ReportMetric(quantileMs(la, 99)/quantileMs(lp, 99), "auth/plain-p99")
	b.ReportMetric(quantileMs(la, 50)/quantileMs(lp, 50), "auth/plain-p50")
}

// latencyCluster is size store nodes on loopback, each with a
// subscription on one cluster row.
type latencyCluster struct {
	clients []*sdkstore.Client
	subs    []*sdkstore.Subscription
}

func startLatencyCluster(b *testing.B, size int, auth bool) *latencyCluster {
	ctx := context.Background()
	dir := b.TempDir()
	var nodes []*server.Node
	var boot []string
	for i := 0; i < size; i++ {
		cfg := server.Config{
			DBPath: filepath.Join(dir, strconv.Itoa(i)+".db"), SubsPath: filepath.Join(dir, strconv.Itoa(i)+".subs.db"),
			SchemaSQL: schema.SQL(), APIAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Bootstrap: boot, Fast: true,
		}
		if auth {
			cfg.Token, cfg.GossipKey = "tok", []byte("0123456789abcdef0123456789abcdef")
		} else {
			cfg.NoAuth, cfg.PlainGossip = true, true
		}
		n, err := server.Start(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
		boot = append(boot, n.GossipAddr())
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range nodes {
		for len(n.Members()) < size-1 || countUp(n) < size-1 {
			if time.Now().After(deadline) {
				b.Fatalf("membership did not form")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	c := &latencyCluster{clients: make([]*sdkstore.Client, size), subs: make([]*sdkstore.Subscription, size)}
	for i, n := range nodes {
		var opts []sdkstore.Option
		if auth {
			opts = append(opts, sdkstore.WithToken("tok"))
		}
		c.clients[i] = sdkstore.New(n.APIAddr(), opts...)
		s, err := c.clients[i].Subscribe(ctx, sdkstore.Stmt(`SELECT id, body FROM cluster WHERE id = 'bench'`), sdkstore.SubscribeOptions{SkipRows: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		c.subs[i] = s
		<-s.Events // eoq
	}
	if _, err := c.clients[0].Exec(ctx, sdkstore.Stmt(`INSERT INTO cluster (id, body) VALUES ('bench', '0')`)); err != nil {
		b.Fatal(err)
	}
	for _, s := range c.subs {
		waitBody(b, s, "0")
	}
	return c
}

// write updates the row through node i%size and waits until every node's
// subscription has seen it.
func (c *latencyCluster) write(b *testing.B, i int) time.Duration {
	want := strconv.Itoa(i)
	start := time.Now()
	if _, err := c.clients[i%len(c.clients)].Exec(context.Background(), sdkstore.Stmt(`UPDATE cluster SET body = ? WHERE id = 'bench'`, want)); err != nil {
		b.Fatal(err)
	}
	for _, s := range c.subs {
		waitBody(b, s, want)
	}
	return time.Since(start)
}

func quantileMs(lat []time.Duration, q int) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[len(s)*q/100].Microseconds()) / 1000
}

func countUp(n *server.Node) int {
	up := 0
	for _, m := range n.Members() {
		if m.State == "up" {
			up++
		}
	}
	return up
}

func waitBody(b *testing.B, s *sdkstore.Subscription, want string) {
	b.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				b.Fatalf("subscription ended: %v", s.Err())
			}
			if ev.Kind == sdkstore.EventChange && ev.ChangeKind != "delete" && ev.Values[1] == want {
				return
			}
		case <-timeout:
			b.Fatalf("no event with body %s within 20s", want)
		}
	}
}
