package crdt

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaRules checks each of Corrosion's schema rules is enforced with
// an error naming the table and column at fault.
func TestSchemaRules(t *testing.T) {
	cases := []struct{ name, sql, want string }{
		{"no primary key", `CREATE TABLE t (a TEXT);`, "table t: a primary key is required"},
		{"nullable primary key", `CREATE TABLE t (a TEXT PRIMARY KEY, b TEXT);`, "table t column a: primary key columns must be NOT NULL"},
		{"not null without default", `CREATE TABLE t (a TEXT PRIMARY KEY NOT NULL, b TEXT NOT NULL);`, "table t column b: NOT NULL columns need a DEFAULT"},
		{"unique column", `CREATE TABLE t (a TEXT PRIMARY KEY NOT NULL, b TEXT UNIQUE);`, "table t column b: unique"},
		{"unique index", `CREATE TABLE t (a TEXT PRIMARY KEY NOT NULL, b TEXT); CREATE UNIQUE INDEX tb ON t(b);`, "table t column b: unique"},
		{"foreign key", `CREATE TABLE p (id TEXT PRIMARY KEY NOT NULL); CREATE TABLE t (a TEXT PRIMARY KEY NOT NULL, p TEXT REFERENCES p(id));`, "table t column p: foreign keys"},
		{"view", `CREATE TABLE t (a TEXT PRIMARY KEY NOT NULL); CREATE VIEW v AS SELECT * FROM t;`, "view v: only CREATE TABLE"},
		{"temp table", `CREATE TEMP TABLE t (a TEXT PRIMARY KEY NOT NULL);`, "temporary tables"},
		{"ctas", `CREATE TABLE s (a TEXT PRIMARY KEY NOT NULL); CREATE TABLE t AS SELECT * FROM s;`, "table t: CREATE TABLE AS SELECT"},
		{"reserved name", `CREATE TABLE __ployz_x (a TEXT PRIMARY KEY NOT NULL);`, "reserved"},
		{"bad SQL", `CREATE TABLE t (`, "invalid SQL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSchema(context.Background(), tc.sql)
			var se *SchemaError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a schema error containing %q", err, tc.want)
			}
		})
	}
	ok := `CREATE TABLE t (a TEXT PRIMARY KEY NOT NULL, b TEXT NOT NULL DEFAULT '', j TEXT CHECK (json_valid(j)),
		g TEXT AS (json_extract(j, '$.x'))); CREATE INDEX tb ON t(b);`
	s, err := ParseSchema(context.Background(), ok)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Tables["t"].Cols, ","); got != "b,j" {
		t.Fatalf("replicated columns %q, want b,j (generated column excluded)", got)
	}
}

// TestSchemaChangesAdditiveOnly reopens a database with changed schemas.
func TestSchemaChangesAdditiveOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	base := `CREATE TABLE t (a TEXT PRIMARY KEY NOT NULL, b TEXT NOT NULL DEFAULT 'x');`
	e, err := Open(ctx, path, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Exec(ctx, []Stmt{{Query: `INSERT INTO t (a) VALUES ('1')`}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, sql, want string }{
		{"drop table", `CREATE TABLE u (a TEXT PRIMARY KEY NOT NULL);`, "table t: dropping a table"},
		{"drop column", `CREATE TABLE t (a TEXT PRIMARY KEY NOT NULL);`, "table t column b: removing a column"},
		{"change column", `CREATE TABLE t (a TEXT PRIMARY KEY NOT NULL, b INTEGER NOT NULL DEFAULT 0);`, "table t column b: changing a column"},
	} {
		if err := e.Reload(ctx, tc.sql); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v want %q", tc.name, err, tc.want)
		}
	}
	grown := base[:len(base)-2] + `, c INTEGER NOT NULL DEFAULT 5); CREATE TABLE u (id TEXT PRIMARY KEY NOT NULL); CREATE INDEX tc ON t(c);`
	if err := e.Reload(ctx, grown); err != nil {
		t.Fatalf("additive change refused: %v", err)
	}
	// The new column is captured for replication straight away.
	var got Changeset
	e.OnCommit(func(c Commit) { got = c.Changesets[0] })
	if _, _, err := e.Exec(ctx, []Stmt{{Query: `UPDATE t SET c = 6 WHERE a = '1'`}}); err != nil {
		t.Fatal(err)
	}
	if len(got.Changes) != 1 || got.Changes[0].Col != "c" || got.Changes[0].Val.I != 6 {
		t.Fatalf("changeset after adding column: %+v", got)
	}
	e.Close()
	e, err = Open(ctx, path, grown, nil)
	if err != nil {
		t.Fatalf("reopen with grown schema: %v", err)
	}
	defer e.Close()
	var c int
	if err := e.ReadDB().QueryRow(`SELECT c FROM t WHERE a = '1'`).Scan(&c); err != nil || c != 6 {
		t.Fatalf("c = %d, %v", c, err)
	}
}
