package crdt

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Table describes one replicated table.
type Table struct {
	Name string
	PK   []string // primary key columns in key order
	Cols []string // stored non-key columns (generated columns excluded)
	SQL  string
}

// Schema is a validated set of replicated tables and indexes.
type Schema struct {
	Tables  map[string]*Table
	Indexes map[string]string // index name -> CREATE INDEX sql
	Source  string
}

// SchemaError is a violation of the schema rules; it names what is wrong.
type SchemaError struct{ Msg string }

// Error returns the rule violation.
func (e *SchemaError) Error() string { return "schema: " + e.Msg }

func schemaErr(format string, a ...any) error { return &SchemaError{Msg: fmt.Sprintf(format, a...)} }

// ReadSchemaPaths concatenates every .sql file in the given files or
// directories (directories in name order), as Corrosion's schema_paths does.
func ReadSchemaPaths(paths []string) (string, error) {
	var b strings.Builder
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("schema path %s: %w", p, err)
		}
		files := []string{p}
		if st.IsDir() {
			files, err = filepath.Glob(filepath.Join(p, "*.sql"))
			if err != nil {
				return "", fmt.Errorf("schema dir %s: %w", p, err)
			}
			sort.Strings(files)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return "", fmt.Errorf("read schema file %s: %w", f, err)
			}
			b.Write(data)
			b.WriteString("\n;\n")
		}
	}
	return b.String(), nil
}

// ctasRe finds CREATE TABLE ... AS SELECT in the source; SQLite stores such
// a table with a rewritten column list, so the source is the only witness.
var ctasRe = regexp.MustCompile(`(?is)\bCREATE\s+(?:TEMP\w*\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?("[^"]+"|[^\s(]+)\s+AS\b`)

// ParseSchema validates schema SQL against Corrosion's rules by applying it
// to a scratch in-memory database and inspecting what SQLite built, so the
// rules see exactly what SQLite understood rather than a hand parse.
func ParseSchema(ctx context.Context, src string) (*Schema, error) {
	db, err := openScratch(ctx, src)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if m := ctasRe.FindStringSubmatch(src); m != nil {
		return nil, schemaErr("table %s: CREATE TABLE AS SELECT is not allowed", strings.Trim(m[1], `"`))
	}
	var tmp int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM temp.sqlite_master`).Scan(&tmp); err != nil {
		return nil, fmt.Errorf("inspect temp schema: %w", err)
	}
	if tmp > 0 {
		return nil, schemaErr("temporary tables are not allowed")
	}
	s := &Schema{Tables: map[string]*Table{}, Indexes: map[string]string{}, Source: src}
	rows, err := db.QueryContext(ctx, `SELECT type, name, tbl_name, coalesce(sql,'') FROM sqlite_master ORDER BY rowid`)
	if err != nil {
		return nil, fmt.Errorf("inspect schema: %w", err)
	}
	type obj struct{ typ, name, tbl, sql string }
	var objs []obj
	for rows.Next() {
		var o obj
		if err := rows.Scan(&o.typ, &o.name, &o.tbl, &o.sql); err != nil {
			rows.Close()
			return nil, fmt.Errorf("inspect schema: %w", err)
		}
		objs = append(objs, o)
	}
	rows.Close()
	for _, o := range objs {
		switch o.typ {
		case "table":
			if strings.HasPrefix(o.name, "__ployz") || strings.HasPrefix(o.name, "sqlite_") || strings.HasPrefix(o.name, "__corro") {
				return nil, schemaErr("table %s: name is reserved", o.name)
			}
			t, err := inspectTable(ctx, db, o.name, o.sql)
			if err != nil {
				return nil, err
			}
			s.Tables[o.name] = t
		case "index":
			if o.sql == "" {
				continue // automatic index for the primary key
			}
			s.Indexes[o.name] = o.sql
		default:
			return nil, schemaErr("%s %s: only CREATE TABLE and CREATE INDEX are allowed", o.typ, o.name)
		}
	}
	return s, nil
}

func openScratch(ctx context.Context, src string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		return nil, fmt.Errorf("open scratch database: %w", err)
	}
	// One connection: each new :memory: connection would be a new database.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, src); err != nil {
		db.Close()
		return nil, schemaErr("invalid SQL: %v", err)
	}
	return db, nil
}

type colInfo struct {
	name, typ string
	notnull   bool
	dflt      sql.NullString
	pk        int
	hidden    int
}

func tableInfo(ctx context.Context, q querier, table string) ([]colInfo, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?)`, table)
	if err != nil {
		return nil, fmt.Errorf("table %s: read columns: %w", table, err)
	}
	defer rows.Close()
	var out []colInfo
	for rows.Next() {
		var c colInfo
		if err := rows.Scan(&c.name, &c.typ, &c.notnull, &c.dflt, &c.pk, &c.hidden); err != nil {
			return nil, fmt.Errorf("table %s: read columns: %w", table, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

type querier2 interface {
	querier
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

func inspectTable(ctx context.Context, db *sql.DB, name, createSQL string) (*Table, error) {
	cols, err := tableInfo(ctx, db, name)
	if err != nil {
		return nil, err
	}
	t := &Table{Name: name, SQL: createSQL}
	pks := map[int]string{}
	for _, c := range cols {
		switch {
		case c.pk > 0:
			if !c.notnull {
				return nil, schemaErr("table %s column %s: primary key columns must be NOT NULL", name, c.name)
			}
			if c.hidden != 0 {
				return nil, schemaErr("table %s column %s: primary key columns must be plain columns", name, c.name)
			}
			pks[c.pk] = c.name
		case c.hidden == 2 || c.hidden == 3:
			// Generated columns derive from others and are never replicated.
		default:
			if c.notnull && !c.dflt.Valid {
				return nil, schemaErr("table %s column %s: NOT NULL columns need a DEFAULT", name, c.name)
			}
			t.Cols = append(t.Cols, c.name)
		}
	}
	if len(pks) == 0 {
		return nil, schemaErr("table %s: a primary key is required", name)
	}
	for i := 1; i <= len(pks); i++ {
		t.PK = append(t.PK, pks[i])
	}
	if err := checkIndexes(ctx, db, name); err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT "from", "table" FROM pragma_foreign_key_list(?)`, name)
	if err != nil {
		return nil, fmt.Errorf("table %s: read foreign keys: %w", name, err)
	}
	defer rows.Close()
	if rows.Next() {
		var from, to string
		_ = rows.Scan(&from, &to)
		return nil, schemaErr("table %s column %s: foreign keys are not allowed (references %s)", name, from, to)
	}
	return t, nil
}

func checkIndexes(ctx context.Context, db *sql.DB, table string) error {
	rows, err := db.QueryContext(ctx, `SELECT name, "unique", origin FROM pragma_index_list(?)`, table)
	if err != nil {
		return fmt.Errorf("table %s: read indexes: %w", table, err)
	}
	type idx struct {
		name   string
		unique bool
		origin string
	}
	var list []idx
	for rows.Next() {
		var i idx
		if err := rows.Scan(&i.name, &i.unique, &i.origin); err != nil {
			rows.Close()
			return fmt.Errorf("table %s: read indexes: %w", table, err)
		}
		list = append(list, i)
	}
	rows.Close()
	for _, i := range list {
		if !i.unique || i.origin == "pk" {
			continue
		}
		var cols []string
		crow, err := db.QueryContext(ctx, `SELECT coalesce(name,'<expr>') FROM pragma_index_info(?)`, i.name)
		if err == nil {
			for crow.Next() {
				var c string
				_ = crow.Scan(&c)
				cols = append(cols, c)
			}
			crow.Close()
		}
		return schemaErr("table %s column %s: unique constraints and indexes are not allowed (%s)", table, strings.Join(cols, ","), i.name)
	}
	return nil
}
