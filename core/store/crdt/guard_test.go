package crdt

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestSingleStatement(t *testing.T) {
	ok := []string{
		"SELECT 1",
		"SELECT 1;",
		"SELECT 1; -- trailing comment",
		"SELECT 1; /* c */ ;",
		"SELECT 'a;b'",
		`SELECT "we;ird" FROM kv`,
		"SELECT 'it''s; fine'",
		"SELECT [x;y] FROM kv",
		"SELECT 1 -- ; DROP TABLE kv",
		"SELECT 1 /* ; DROP TABLE kv */",
	}
	for _, q := range ok {
		if err := SingleStatement(q); err != nil {
			t.Errorf("%q refused: %v", q, err)
		}
	}
	bad := []string{
		"DELETE FROM kv; CREATE TABLE t(x)",
		"SELECT 1;SELECT 2",
		"SELECT 'a'';'; DROP TABLE kv",
		"SELECT 1; -- c\nDROP TABLE kv",
		"SELECT 1; /* c */ DROP TABLE kv",
	}
	for _, q := range bad {
		var na *ErrNotAllowed
		if err := SingleStatement(q); !errors.As(err, &na) || !strings.Contains(err.Error(), "more than one statement") {
			t.Errorf("%q: got %v, want a multiple-statement refusal", q, err)
		}
	}
	if err := SingleStatement("SELECT 'open"); err == nil || !strings.Contains(err.Error(), "unterminated") {
		t.Errorf("unterminated quote: got %v", err)
	}
}

// TestGuardEngine checks the engine itself refuses what the API must, so
// every caller of Exec and Query is covered, not only the HTTP handlers.
func TestGuardEngine(t *testing.T) {
	ctx := context.Background()
	e, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), `CREATE TABLE kv (k TEXT PRIMARY KEY NOT NULL, v TEXT);`, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, _, err := e.Exec(ctx, []Stmt{{Query: `INSERT INTO kv VALUES ('a', 'b')`}}); err != nil {
		t.Fatalf("plain insert refused: %v", err)
	}
	for _, q := range []string{"ALTER TABLE kv ADD COLUMN z TEXT", "VACUUM", "REINDEX", "ANALYZE", "SAVEPOINT x", "DETACH DATABASE temp", "SELECT load_extension('x')"} {
		_, _, err := e.Exec(ctx, []Stmt{{Query: q}})
		var na *ErrNotAllowed
		if !errors.As(err, &na) && !(err != nil && q == "VACUUM") {
			t.Errorf("%s: got %v, want a refusal", q, err)
		}
	}
	rows, err := e.Query(ctx, `SELECT k, v FROM kv`)
	if err != nil {
		t.Fatalf("plain query refused: %v", err)
	}
	rows.Close()
	// The engine's own statements still run after a refusal.
	if _, _, err := e.Exec(ctx, []Stmt{{Query: `UPDATE kv SET v = 'c' WHERE k = 'a'`}}); err != nil {
		t.Fatalf("update after refusals: %v", err)
	}
}
