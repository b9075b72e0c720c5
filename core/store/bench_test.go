package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
	"github.com/ployz/ployz/core/store/server"
)

// BenchmarkWriteThroughput compares one-row write transactions through the
// store (engine alone and through the HTTP API) with raw SQLite inserts on
// the same disk and pragmas, measured in the same run.
func BenchmarkWriteThroughput(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "raw.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	if _, err := raw.Exec(SchemaSQL()); err != nil {
		b.Fatal(err)
	}
	n, err := server.Start(ctx, server.Config{DBPath: filepath.Join(dir, "store.db"), SchemaSQL: SchemaSQL(), APIAddr: "127.0.0.1:0", NoAuth: true})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	c := New(n.APIAddr())
	const q = `INSERT INTO containers (id, owner, body, updated_at) VALUES (?, 'm1', '{"state":"running"}', 1)`
	var rawD, engD, apiD time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := raw.Exec(q, "r"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, _, err := n.Engine().Exec(ctx, []crdt.Stmt{{Query: q, Args: []any{"e" + strconv.Itoa(i)}}}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := c.Exec(ctx, Stmt(q, "a"+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
		rawD, engD, apiD = rawD+t1.Sub(t0), engD+t2.Sub(t1), apiD+time.Since(t2)
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(rawD), "raw-ns/insert")
	b.ReportMetric(per(engD), "engine-ns/insert")
	b.ReportMetric(per(apiD), "api-ns/insert")
	b.ReportMetric(per(rawD)/per(engD), "engine/raw-throughput")
	b.ReportMetric(per(rawD)/per(apiD), "api/raw-throughput")
}

// BenchmarkReplicationLatency measures the time from a write on one node
// to the matching subscription event on every node (p50/p99).
func BenchmarkReplicationLatency(b *testing.B) {
	for _, size := range []int{3, 10} {
		b.Run(fmt.Sprintf("%dnodes", size), func(b *testing.B) { benchLatency(b, size) })
	}
}

func benchLatency(b *testing.B, size int) {
	ctx := context.Background()
	dir := b.TempDir()
	var nodes []*server.Node
	var boot []string
	for i := 0; i < size; i++ {
		n, err := server.Start(ctx, server.Config{
			DBPath: filepath.Join(dir, strconv.Itoa(i)+".db"), SubsPath: filepath.Join(dir, strconv.Itoa(i)+".subs.db"),
			SchemaSQL: SchemaSQL(), APIAddr: "127.0.0.1:0", NoAuth: true, GossipAddr: "127.0.0.1:0", GossipKey: []byte("0123456789abcdef0123456789abcdef"), Bootstrap: boot, Fast: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close()
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
	clients := make([]*Client, size)
	subs := make([]*Subscription, size)
	for i, n := range nodes {
		clients[i] = New(n.APIAddr())
		s, err := clients[i].Subscribe(ctx, Stmt(`SELECT id, body FROM cluster WHERE id = 'bench'`), SubscribeOptions{SkipRows: true})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		subs[i] = s
		<-s.Events // eoq
	}
	if _, err := clients[0].Exec(ctx, Stmt(`INSERT INTO cluster (id, body) VALUES ('bench', '0')`)); err != nil {
		b.Fatal(err)
	}
	for _, s := range subs {
		waitBody(b, s, "0")
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		want := strconv.Itoa(i)
		start := time.Now()
		if _, err := clients[i%size].Exec(ctx, Stmt(`UPDATE cluster SET body = ? WHERE id = 'bench'`, want)); err != nil {
			b.Fatal(err)
		}
		for _, s := range subs {
			waitBody(b, s, want)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
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

func waitBody(b *testing.B, s *Subscription, want string) {
	b.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				b.Fatalf("subscription ended: %v", s.Err())
			}
			if ev.Kind == EventChange && ev.ChangeKind != "delete" && ev.Values[1] == want {
				return
			}
		case <-timeout:
			b.Fatalf("no event with body %s within 20s", want)
		}
	}
}
