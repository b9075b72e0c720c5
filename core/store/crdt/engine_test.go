package crdt

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
)

const testSchema = `CREATE TABLE kv (k TEXT PRIMARY KEY NOT NULL, v TEXT NOT NULL DEFAULT '', n INTEGER);`

func openTest(t *testing.T, name string) *Engine {
	t.Helper()
	e, err := Open(context.Background(), filepath.Join(t.TempDir(), name+".db"), testSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func exec(t *testing.T, e *Engine, q string, args ...any) *Changeset {
	t.Helper()
	var got *Changeset
	e.OnCommit(func(c Commit) {
		if c.Local {
			got = &c.Changesets[0]
		}
	})
	if _, _, err := e.Exec(context.Background(), []Stmt{{Query: q, Args: args}}); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return got
}

func dump(t *testing.T, e *Engine) [][]any {
	t.Helper()
	rows, err := e.ReadDB().Query(`SELECT k, v, n FROM kv ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		var k, v string
		var n any
		if err := rows.Scan(&k, &v, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, []any{k, v, n})
	}
	return out
}

// TestConcurrentUpdateDeleteReinsert checks the merge rules on two engines
// that exchange changesets in opposite orders.
func TestConcurrentUpdateDeleteReinsert(t *testing.T) {
	ctx := context.Background()
	a, b := openTest(t, "a"), openTest(t, "b")
	var fromA, fromB []Changeset
	a.OnCommit(func(c Commit) {
		if c.Local {
			fromA = append(fromA, c.Changesets...)
		}
	})
	b.OnCommit(func(c Commit) {
		if c.Local {
			fromB = append(fromB, c.Changesets...)
		}
	})
	exec(t, a, `INSERT INTO kv(k, v, n) VALUES ('x', 'a1', 1)`)
	if _, err := b.Apply(ctx, fromA); err != nil {
		t.Fatal(err)
	}
	// Concurrent: a updates twice (higher col_version), b deletes (higher cl).
	exec(t, a, `UPDATE kv SET v='a2' WHERE k='x'`)
	exec(t, a, `UPDATE kv SET v='a3' WHERE k='x'`)
	exec(t, b, `DELETE FROM kv WHERE k='x'`)
	exec(t, b, `INSERT INTO kv(k, v) VALUES ('y', 'b')`)
	exec(t, a, `INSERT INTO kv(k, v) VALUES ('y', 'a')`)
	if _, err := b.Apply(ctx, fromA); err != nil {
		t.Fatal(err)
	}
	for i := len(fromB) - 1; i >= 0; i-- { // reverse order on purpose
		if _, err := a.Apply(ctx, fromB[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	da, db := dump(t, a), dump(t, b)
	if !reflect.DeepEqual(da, db) {
		t.Fatalf("diverged:\na=%v\nb=%v", da, db)
	}
	// The delete (cl 2) beats updates; 'y' is a tie on col_version 1 so the
	// larger value 'b' wins.
	want := [][]any{{"y", "b", nil}}
	if !reflect.DeepEqual(da, want) {
		t.Fatalf("got %v want %v", da, want)
	}
	// Re-insert after delete: a new life beats the tombstone everywhere.
	exec(t, a, `INSERT INTO kv(k, v, n) VALUES ('x', 'again', 7)`)
	if _, err := b.Apply(ctx, fromA); err != nil {
		t.Fatal(err)
	}
	if da, db := dump(t, a), dump(t, b); !reflect.DeepEqual(da, db) || len(da) != 2 {
		t.Fatalf("after re-insert: a=%v b=%v", da, db)
	}
	// Sync serving: a fresh engine pulling everything from b converges.
	c := openTest(t, "c")
	for site := range b.Book() {
		for _, r := range c.Book().Missing(b.Book(), site) {
			css, err := b.ChangesFor(ctx, site, r.Lo, r.Hi)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Apply(ctx, css); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dc := dump(t, c); !reflect.DeepEqual(dc, dump(t, b)) {
		t.Fatalf("synced copy differs: %v vs %v", dc, dump(t, b))
	}
	if c.Book().Gaps() != 0 || !reflect.DeepEqual(c.Book().Vector(), b.Book().Vector()) {
		t.Fatalf("book after sync: %v vs %v", c.Book(), b.Book())
	}
}

func TestBookMissing(t *testing.T) {
	mine, theirs := Book{}, Book{}
	mine.Add("s", 1, 3)
	mine.Add("s", 7, 8)
	theirs.Add("s", 1, 10)
	got := mine.Missing(theirs, "s")
	want := []Range{{4, 6}, {9, 10}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("missing %v want %v", got, want)
	}
	if mine.Head("s") != 3 || mine.Gaps() != 3 {
		t.Fatalf("head %d gaps %d", mine.Head("s"), mine.Gaps())
	}
}
