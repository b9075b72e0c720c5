package crdt

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkEngineInsert measures one-row write transactions through the
// capture path (see core/store's BenchmarkWriteThroughput for the ratio
// against raw SQLite).
func BenchmarkEngineInsert(b *testing.B) {
	ctx := context.Background()
	e, err := Open(ctx, filepath.Join(b.TempDir(), "b.db"), testSchema, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := e.Exec(ctx, []Stmt{{Query: `INSERT INTO kv (k, v, n) VALUES (?, 'x', 1)`, Args: []any{strconv.Itoa(i)}}}); err != nil {
			b.Fatal(err)
		}
	}
}
