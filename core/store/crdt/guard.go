package crdt

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	sqlite "modernc.org/sqlite"
)

// Statements from API clients are checked by SQLite's authorizer, which
// sees what SQLite actually compiled (comments, case and statement
// boundaries cannot hide anything from it), and by a lexer that refuses a
// second statement in one string. Writes may only INSERT, UPDATE or DELETE
// rows of the schema's tables; queries may only read. DDL, ATTACH, PRAGMA,
// transaction control and the store's own metadata are refused.

// ErrNotAllowed marks statements the store refuses to run for a client.
type ErrNotAllowed struct{ Msg string }

// Error says what was refused and why.
func (e *ErrNotAllowed) Error() string { return e.Msg + " is not allowed through the store API" }

// guardConnector installs an authorizer on every connection it opens.
type guardConnector struct {
	inner driver.Connector
	fn    sqlite.AuthorizerFn
}

func (g *guardConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := g.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	r, ok := c.(sqlite.AuthorizerRegisterer)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("sqlite driver offers no authorizer")
	}
	if err := r.RegisterAuthorizer(g.fn); err != nil {
		c.Close()
		return nil, fmt.Errorf("install authorizer: %w", err)
	}
	return c, nil
}

func (g *guardConnector) Driver() driver.Driver { return g.inner.Driver() }

func openGuarded(dsn string, fn sqlite.AuthorizerFn) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(&guardConnector{inner: c, fn: fn}), nil
}

// denial remembers why the authorizer last refused, so the error a client
// gets names the operation instead of SQLite's bare "not authorized".
type denial struct {
	mu  sync.Mutex
	msg string
}

// set keeps the first refusal: SQLite stops compiling at it.
func (d *denial) set(msg string) sqlite.AuthorizerReturnCode {
	d.mu.Lock()
	if d.msg == "" {
		d.msg = msg
	}
	d.mu.Unlock()
	return sqlite.AuthorizerDeny
}

func (d *denial) take() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.msg
	d.msg = ""
	return m
}

var actionNames = map[sqlite.AuthorizerActionCode]string{
	sqlite.AuthCreateIndex: "CREATE INDEX", sqlite.AuthCreateTable: "CREATE TABLE", sqlite.AuthCreateTempIndex: "CREATE INDEX",
	sqlite.AuthCreateTempTable: "CREATE TABLE", sqlite.AuthCreateTempTrigger: "CREATE TRIGGER", sqlite.AuthCreateTempView: "CREATE VIEW",
	sqlite.AuthCreateTrigger: "CREATE TRIGGER", sqlite.AuthCreateView: "CREATE VIEW", sqlite.AuthDropIndex: "DROP INDEX",
	sqlite.AuthDropTable: "DROP TABLE", sqlite.AuthDropTempIndex: "DROP INDEX", sqlite.AuthDropTempTable: "DROP TABLE",
	sqlite.AuthDropTempTrigger: "DROP TRIGGER", sqlite.AuthDropTempView: "DROP VIEW", sqlite.AuthDropTrigger: "DROP TRIGGER",
	sqlite.AuthDropView: "DROP VIEW", sqlite.AuthPragma: "PRAGMA", sqlite.AuthTransaction: "transaction control (each request is one transaction)",
	sqlite.AuthAttach: "ATTACH", sqlite.AuthDetach: "DETACH", sqlite.AuthAlterTable: "ALTER TABLE", sqlite.AuthReindex: "REINDEX",
	sqlite.AuthAnalyze: "ANALYZE", sqlite.AuthCreateVTable: "CREATE VIRTUAL TABLE", sqlite.AuthDropVTable: "DROP VIRTUAL TABLE",
	sqlite.AuthSavepoint: "SAVEPOINT (each request is one transaction)", sqlite.AuthInsert: "INSERT", sqlite.AuthUpdate: "UPDATE",
	sqlite.AuthDelete: "DELETE", sqlite.AuthRead: "reading",
}

// dmlName names a write; SQLite presents DDL first as a write to its
// catalog, so those are named as the schema change they are.
func dmlName(a sqlite.AuthorizerActionCode, db, table string) string {
	if strings.EqualFold(table, "sqlite_master") || strings.EqualFold(table, "sqlite_temp_master") || strings.EqualFold(table, "sqlite_schema") {
		switch a {
		case sqlite.AuthInsert:
			return "schema change (CREATE)"
		case sqlite.AuthDelete:
			return "schema change (DROP)"
		default:
			return "schema change (ALTER)"
		}
	}
	return actionName(a) + " on " + db + "." + table
}

func actionName(a sqlite.AuthorizerActionCode) string {
	if n, ok := actionNames[a]; ok {
		return n
	}
	return fmt.Sprintf("SQLite operation %d", a)
}

// mainDB reports a read of the store's own database; SQLite passes no
// database name (NULL, seen as "") for some reads, e.g. count(*).
func mainDB(db string) bool { return db == "main" || db == "" }

// internalName reports names only the store itself may touch.
func internalName(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, "__ployz") || strings.HasPrefix(n, "sqlite_") || strings.HasPrefix(n, "__corro")
}

// readOnlyPragmas are the introspection pragmas a query may read.
var readOnlyPragmas = map[string]bool{
	"table_info": true, "table_xinfo": true, "table_list": true, "index_list": true, "index_info": true,
	"index_xinfo": true, "foreign_key_list": true, "data_version": true, "user_version": true, "schema_version": true,
}

// readPolicy guards the pool that runs clients' queries.
func readPolicy(d *denial) sqlite.AuthorizerFn {
	return func(a sqlite.AuthorizerActionCode, arg1, arg2, db, _ string) sqlite.AuthorizerReturnCode {
		switch a {
		case sqlite.AuthSelect, sqlite.AuthRecursive:
			return sqlite.AuthorizerOK
		case sqlite.AuthRead:
			if mainDB(db) {
				return sqlite.AuthorizerOK
			}
			return d.set("reading database " + db)
		case sqlite.AuthFunction:
			if strings.EqualFold(arg2, "load_extension") {
				return d.set("load_extension()")
			}
			return sqlite.AuthorizerOK
		case sqlite.AuthPragma:
			if arg2 == "" && readOnlyPragmas[strings.ToLower(arg1)] {
				return sqlite.AuthorizerOK
			}
			return d.set("PRAGMA " + arg1)
		}
		if a == sqlite.AuthInsert || a == sqlite.AuthUpdate || a == sqlite.AuthDelete {
			return d.set(dmlName(a, db, arg1) + " in a query")
		}
		return d.set(actionName(a) + " in a query")
	}
}

// writePolicy guards the writer connection while it runs a client's
// statement (user is set); the engine's own statements run unguarded.
func writePolicy(user *atomic.Bool, schema func() *Schema, d *denial) sqlite.AuthorizerFn {
	return func(a sqlite.AuthorizerActionCode, arg1, arg2, db, trigger string) sqlite.AuthorizerReturnCode {
		if !user.Load() || trigger != "" {
			// Trigger bodies come from the engine and the schema only.
			return sqlite.AuthorizerOK
		}
		switch a {
		case sqlite.AuthSelect, sqlite.AuthRecursive:
			return sqlite.AuthorizerOK
		case sqlite.AuthInsert, sqlite.AuthUpdate, sqlite.AuthDelete:
			if db == "main" && schema().Tables[arg1] != nil {
				return sqlite.AuthorizerOK
			}
			name := dmlName(a, db, arg1)
			if !strings.HasPrefix(name, "schema change") {
				name += " (not a table of the schema)"
			}
			return d.set(name)
		case sqlite.AuthRead:
			if mainDB(db) && !internalName(arg1) {
				return sqlite.AuthorizerOK
			}
			return d.set("reading " + db + "." + arg1)
		case sqlite.AuthFunction:
			if strings.EqualFold(arg2, "load_extension") {
				return d.set("load_extension()")
			}
			return sqlite.AuthorizerOK
		case sqlite.AuthPragma:
			return d.set("PRAGMA " + arg1)
		}
		return d.set(actionName(a))
	}
}

// guardErr turns SQLite's authorization failure into a named refusal.
func guardErr(err error, d *denial) error {
	if err == nil {
		return nil
	}
	msg := d.take()
	if msg == "" || !(strings.Contains(err.Error(), "not authorized") || strings.Contains(err.Error(), "prohibited")) {
		return err
	}
	return &ErrNotAllowed{Msg: msg}
}

// SingleStatement refuses a string holding more than one SQL statement:
// modernc's driver would run every one of them. It skips quoted strings,
// quoted identifiers and comments, so a ';' inside them does not count.
func SingleStatement(q string) error {
	end, err := statementEnd(q)
	if err != nil {
		return err
	}
	if end < 0 {
		return nil
	}
	rest, err := skipSpace(q[end+1:])
	if err != nil {
		return err
	}
	if rest != "" {
		return &ErrNotAllowed{Msg: "more than one statement in one query string (send them as separate statements)"}
	}
	return nil
}

// statementEnd returns the index of the first ';' outside quotes and
// comments, or -1.
func statementEnd(q string) (int, error) {
	for i := 0; i < len(q); i++ {
		switch c := q[i]; c {
		case '\'', '"', '`':
			j := i + 1
			for ; ; j++ {
				if j >= len(q) {
					return 0, fmt.Errorf("unterminated %c quote in query", c)
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // a doubled quote escapes itself
						j++
						continue
					}
					break
				}
			}
			i = j
		case '[':
			j := strings.IndexByte(q[i+1:], ']')
			if j < 0 {
				return 0, fmt.Errorf("unterminated [ identifier in query")
			}
			i += j + 1
		case '-':
			if i+1 < len(q) && q[i+1] == '-' {
				j := strings.IndexByte(q[i:], '\n')
				if j < 0 {
					return -1, nil
				}
				i += j
			}
		case '/':
			if i+1 < len(q) && q[i+1] == '*' {
				j := strings.Index(q[i+2:], "*/")
				if j < 0 {
					return -1, nil // SQLite ends an open comment at the end
				}
				i += j + 3
			}
		case ';':
			return i, nil
		}
	}
	return -1, nil
}

// skipSpace drops whitespace, comments and empty statements.
func skipSpace(s string) (string, error) {
	for {
		t := strings.TrimLeft(s, " \t\r\n\f;")
		switch {
		case strings.HasPrefix(t, "--"):
			j := strings.IndexByte(t, '\n')
			if j < 0 {
				return "", nil
			}
			s = t[j+1:]
		case strings.HasPrefix(t, "/*"):
			j := strings.Index(t[2:], "*/")
			if j < 0 {
				return "", nil
			}
			s = t[j+4:]
		default:
			return t, nil
		}
	}
}
