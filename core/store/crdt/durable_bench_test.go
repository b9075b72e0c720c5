package crdt

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkDurability compares the two ways to keep a version from being
// handed out twice after power loss, in the same run: synchronous=FULL
// (an fsync inside every commit, under the write lock) against NORMAL plus
// the durable version mark raised before each share (what the broadcast
// loop does). "seq" is one writer, each commit then made shareable;
// "par" is 8 writers at once with one sharer batching like the broadcast
// loop. Ratios above 1 mean the mark is faster.
func BenchmarkDurability(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	open := func(name string, mode Sync) *Engine {
		e, err := OpenWith(ctx, filepath.Join(dir, name), `CREATE TABLE kv (k TEXT PRIMARY KEY NOT NULL, v TEXT);`, nil, Options{Sync: mode})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		return e
	}
	full, mark := open("full.db", SyncFull), open("mark.db", SyncMark)
	write := func(e *Engine, key string) int64 {
		_, v, err := e.Exec(ctx, []Stmt{{Query: `INSERT OR REPLACE INTO kv(k, v) VALUES (?, 'x')`, Args: []any{key}}})
		if err != nil || v == nil {
			b.Fatalf("write %s: %v", key, err)
		}
		return *v
	}
	par := func(e *Engine, round int, share func(int64)) {
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				share(write(e, "p"+strconv.Itoa(round)+"-"+strconv.Itoa(w)))
			}()
		}
		wg.Wait()
	}
	var seqFull, seqMark, seqMarkCommit, parFull, parMark time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := "s" + strconv.Itoa(i)
		t0 := time.Now()
		write(full, k)
		t1 := time.Now()
		v := write(mark, k)
		seqMarkCommit += time.Since(t1) // what a client waits for
		if err := mark.MarkShared(v); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		par(full, i, func(int64) {})
		t3 := time.Now()
		par(mark, i, func(v int64) {
			if err := mark.MarkShared(v); err != nil {
				b.Error(err)
			}
		})
		t4 := time.Now()
		seqFull, seqMark, parFull, parMark = seqFull+t1.Sub(t0), seqMark+t2.Sub(t1), parFull+t3.Sub(t2), parMark+t4.Sub(t3)
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(seqFull), "full-seq-ns/write")
	b.ReportMetric(per(seqMark), "mark-seq-ns/write")
	b.ReportMetric(per(seqMarkCommit), "mark-seq-commit-ns/write")
	b.ReportMetric(per(parFull)/8, "full-par-ns/write")
	b.ReportMetric(per(parMark)/8, "mark-par-ns/write")
	b.ReportMetric(per(seqFull)/per(seqMark), "seq-full/mark")
	b.ReportMetric(per(parFull)/per(parMark), "par-full/mark")
}
