package crdt

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// Commit describes a committed write, local or merged from a peer.
type Commit struct {
	Local      bool
	Tables     []string
	Changesets []Changeset
}

// Engine owns one SQLite database: a single writer connection that carries
// the capture triggers, and a read-only pool for queries.
type Engine struct {
	log hclog.Logger
	rdb *sql.DB // engine's own reads
	qdb *sql.DB // clients' queries, read-only authorizer
	wdb *sql.DB

	user atomic.Bool // the writer runs a client's statement
	wden denial      // why the writer's authorizer last refused
	qden denial

	// schema is read without the write lock: subscription code asks for
	// it from inside commit hooks, which run while the lock is held.
	schema atomic.Pointer[Schema]

	mu      sync.Mutex // serialises writes and guards everything below
	w       *sql.Conn
	wc      *wconn
	site    string
	book    Book
	version int64
	hooks   []func(Commit)
	closed  bool

	mode    Sync
	hwmMu   sync.Mutex // serialises writes of the mark file
	hwm     *hwmFile
	durable atomic.Int64 // highest local version that may leave this node
}

// Sync selects how a commit reaches the disk.
type Sync int

const (
	// SyncMark runs synchronous=NORMAL and keeps a durable version mark
	// (see durable.go): the default.
	SyncMark Sync = iota
	// SyncFull runs synchronous=FULL: every commit is fsynced before it
	// returns. Kept for the durability benchmark.
	SyncFull
)

// Options tunes Open.
type Options struct {
	Sync Sync
}

const metaSQL = `
CREATE TABLE IF NOT EXISTS __ployz_site(id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS __ployz_clock(
  tbl TEXT NOT NULL, pk TEXT NOT NULL, col TEXT NOT NULL,
  ver INTEGER NOT NULL, site TEXT NOT NULL, dbv INTEGER NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY(tbl, pk, col)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS __ployz_clock_origin ON __ployz_clock(site, dbv);
CREATE TABLE IF NOT EXISTS __ployz_book(site TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
  PRIMARY KEY(site, lo)) WITHOUT ROWID;
`

// corroViewsSQL gives clients written for Corrosion the two bookkeeping
// tables they read to wait for sync, as read-only views of the version
// book: crsql_db_versions (site_id BLOB, db_version: the highest version
// applied per site) and __corro_bookkeeping_gaps (actor_id BLOB, start,
// end: each run of versions missing below a site's highest). They are
// recreated on every open so a changed definition takes effect.
const corroViewsSQL = `
DROP VIEW IF EXISTS crsql_db_versions;
CREATE VIEW crsql_db_versions(site_id, db_version) AS
  SELECT unhex(site), max(hi) FROM __ployz_book GROUP BY site;
DROP VIEW IF EXISTS __corro_bookkeeping_gaps;
CREATE VIEW __corro_bookkeeping_gaps(actor_id, start, "end") AS
  SELECT unhex(site), s, e FROM (
    SELECT site, coalesce(lag(hi) OVER (PARTITION BY site ORDER BY lo), 0) + 1 AS s, lo - 1 AS e FROM __ployz_book)
  WHERE s <= e;
`

func dsn(path string, readOnly bool, mode Sync) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	if mode == SyncFull {
		q.Add("_pragma", "synchronous(FULL)")
	} else {
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if needed) the database at path, applies the schema
// additively and loads the site id and version book.
func Open(ctx context.Context, path, schemaSQL string, log hclog.Logger) (*Engine, error) {
	return OpenWith(ctx, path, schemaSQL, log, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path, schemaSQL string, log hclog.Logger, opts Options) (*Engine, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	e := &Engine{log: log, book: Book{}, mode: opts.Sync}
	wdb, err := openGuarded(dsn(path, false, opts.Sync), writePolicy(&e.user, e.Schema, &e.wden))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w, err := wdb.Conn(ctx)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open writer connection to %s: %w", path, err)
	}
	e.wdb, e.w, e.wc = wdb, w, &wconn{c: w, cache: map[string]*sql.Stmt{}}
	err = e.init(ctx, schemaSQL)
	if err == nil {
		err = e.initDurability(ctx, path)
	}
	if err != nil {
		if e.hwm != nil {
			e.hwm.f.Close()
		}
		w.Close()
		wdb.Close()
		return nil, err
	}
	e.rdb, err = sql.Open("sqlite", dsn(path, true, opts.Sync))
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("open read pool for %s: %w", path, err)
	}
	e.rdb.SetMaxOpenConns(8)
	if e.qdb, err = openGuarded(dsn(path, true, opts.Sync), readPolicy(&e.qden)); err != nil {
		e.Close()
		return nil, fmt.Errorf("open query pool for %s: %w", path, err)
	}
	e.qdb.SetMaxOpenConns(8)
	return e, nil
}

func (e *Engine) init(ctx context.Context, schemaSQL string) error {
	if _, err := e.w.ExecContext(ctx, metaSQL); err != nil {
		return fmt.Errorf("create metadata tables: %w", err)
	}
	if _, err := e.w.ExecContext(ctx, corroViewsSQL); err != nil {
		return fmt.Errorf("create Corrosion bookkeeping views: %w", err)
	}
	err := e.w.QueryRowContext(ctx, `SELECT id FROM __ployz_site`).Scan(&e.site)
	if errors.Is(err, sql.ErrNoRows) {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("mint site id: %w", err)
		}
		e.site = hex.EncodeToString(b[:])
		if _, err := e.w.ExecContext(ctx, `INSERT INTO __ployz_site(id) VALUES (?)`, e.site); err != nil {
			return fmt.Errorf("store site id: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("read site id: %w", err)
	}
	rows, err := e.w.QueryContext(ctx, `SELECT site, lo, hi FROM __ployz_book`)
	if err != nil {
		return fmt.Errorf("load version book: %w", err)
	}
	for rows.Next() {
		var s string
		var lo, hi int64
		if err := rows.Scan(&s, &lo, &hi); err != nil {
			rows.Close()
			return fmt.Errorf("load version book: %w", err)
		}
		e.book.Add(s, lo, hi)
	}
	rows.Close()
	e.version = e.book.Max(e.site)
	if _, err := e.w.ExecContext(ctx, `CREATE TEMP TABLE IF NOT EXISTS __ployz_pending(n INTEGER PRIMARY KEY, tbl TEXT, pk TEXT, col TEXT)`); err != nil {
		return fmt.Errorf("create capture table: %w", err)
	}
	return e.applySchema(ctx, schemaSQL)
}

// Reload re-reads schema SQL and applies additive changes.
func (e *Engine) Reload(ctx context.Context, schemaSQL string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applySchema(ctx, schemaSQL)
}

// Site is this database's actor id (hex of 16 random bytes).
func (e *Engine) Site() string { return e.site }

// Schema returns the current schema.
func (e *Engine) Schema() *Schema { return e.schema.Load() }

// Book returns a copy of the applied-version book.
func (e *Engine) Book() Book {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.book.Clone()
}

// ReadDB is the read-only pool for the store's own trusted reads.
func (e *Engine) ReadDB() *sql.DB { return e.rdb }

// Query runs one client query on a pool whose authorizer allows reading
// only (see guard.go); a refusal is an *ErrNotAllowed.
func (e *Engine) Query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := SingleStatement(q); err != nil {
		return nil, err
	}
	return e.queryRaw(ctx, q, args...)
}

// OnCommit registers a hook run after every commit, in commit order, while
// the write lock is held; hooks must not block.
func (e *Engine) OnCommit(f func(Commit)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hooks = append(e.hooks, f)
}

// Close releases the database.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var errs []error
	if e.rdb != nil {
		errs = append(errs, e.rdb.Close())
	}
	if e.qdb != nil {
		errs = append(errs, e.qdb.Close())
	}
	e.wc.reset()
	errs = append(errs, e.w.Close(), e.wdb.Close())
	if e.hwm != nil {
		errs = append(errs, e.hwm.f.Close())
	}
	return errors.Join(errs...)
}

func (e *Engine) fire(c Commit) {
	for _, h := range e.hooks {
		h(c)
	}
}
