package crdt

import (
	"context"
	"fmt"
	"time"
)

// Stmt is one SQL statement with its bound arguments.
type Stmt struct {
	Query string
	Args  []any
}

// Result is the outcome of one statement of a transaction.
type Result struct {
	RowsAffected int64
	Time         float64 // seconds
}

// StmtError reports which statement of a transaction failed.
type StmtError struct {
	Index int
	Err   error
}

// Error names the failing statement.
func (e *StmtError) Error() string { return fmt.Sprintf("statement %d: %v", e.Index, e.Err) }

// Unwrap returns the SQLite error.
func (e *StmtError) Unwrap() error { return e.Err }

type rowKey struct{ tbl, pk string }

type rowMarks struct {
	ins, del bool
	cols     []string
	seen     map[string]bool
}

// Exec runs statements in one write transaction, all or nothing. When a
// replicated table changed it returns the new local version, else nil.
func (e *Engine) Exec(ctx context.Context, stmts []Stmt) ([]Result, *int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, fmt.Errorf("store is closed")
	}
	tx := e.wc
	if err := tx.begin(ctx); err != nil {
		return nil, nil, err
	}
	done := false
	defer func() {
		if !done {
			tx.rollback()
		}
	}()
	results := make([]Result, 0, len(stmts))
	for i, s := range stmts {
		if err := SingleStatement(s.Query); err != nil {
			return nil, nil, &StmtError{Index: i, Err: err}
		}
		start := time.Now()
		e.wden.take()
		e.user.Store(true)
		res, err := e.w.ExecContext(ctx, s.Query, s.Args...)
		e.user.Store(false)
		if err != nil {
			return nil, nil, &StmtError{Index: i, Err: guardErr(err, &e.wden)}
		}
		n, _ := res.RowsAffected()
		results = append(results, Result{RowsAffected: n, Time: time.Since(start).Seconds()})
	}
	// The engine's own statements run without the caller's cancellation:
	// they are short and bounded, and a cancellable context costs each of
	// them a watcher goroutine in the driver (and database/sql), which was
	// a third of a write through the API. A cancelled caller still rolls
	// back: the deferred rollback runs on any error.
	ictx := context.WithoutCancel(ctx)
	cs, err := e.capture(ictx, tx)
	if err != nil {
		return nil, nil, err
	}
	if cs == nil {
		if err := tx.commit(ictx); err != nil {
			return nil, nil, err
		}
		done = true
		return results, nil, nil
	}
	book := e.book.Clone()
	book.Add(e.site, cs.Version, cs.Version)
	if err := persistBook(ictx, tx, book, e.site); err != nil {
		return nil, nil, err
	}
	if err := tx.commit(ictx); err != nil {
		return nil, nil, err
	}
	done = true
	e.book = book
	e.version = cs.Version
	if e.mode == SyncFull {
		e.durable.Store(cs.Version)
	}
	e.fire(Commit{Local: true, Tables: tablesOf(*cs), Changesets: []Changeset{*cs}})
	v := cs.Version
	return results, &v, nil
}

func tablesOf(css ...Changeset) []string {
	seen := map[string]bool{}
	var out []string
	for _, cs := range css {
		for _, c := range cs.Changes {
			if !seen[c.Table] {
				seen[c.Table] = true
				out = append(out, c.Table)
			}
		}
	}
	return out
}

func persistBook(ctx context.Context, tx execer, b Book, site string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM __ployz_book WHERE site=?`, site); err != nil {
		return fmt.Errorf("site %s: store version book: %w", site, err)
	}
	for _, r := range b[site] {
		if _, err := tx.ExecContext(ctx, `INSERT INTO __ployz_book(site,lo,hi) VALUES(?,?,?)`, site, r.Lo, r.Hi); err != nil {
			return fmt.Errorf("site %s: store version book: %w", site, err)
		}
	}
	return nil
}

// capture turns what the triggers recorded into clock updates and the
// outgoing changeset; nil when no replicated row changed.
func (e *Engine) capture(ctx context.Context, tx execer) (*Changeset, error) {
	rows, err := tx.QueryContext(ctx, `SELECT tbl, pk, col FROM temp.__ployz_pending ORDER BY n`)
	if err != nil {
		return nil, fmt.Errorf("read captured changes: %w", err)
	}
	var order []rowKey
	marks := map[rowKey]*rowMarks{}
	for rows.Next() {
		var k rowKey
		var col string
		if err := rows.Scan(&k.tbl, &k.pk, &col); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read captured changes: %w", err)
		}
		m := marks[k]
		if m == nil {
			m = &rowMarks{seen: map[string]bool{}}
			marks[k] = m
			order = append(order, k)
		}
		switch col {
		case "-ins":
			m.ins = true
		case "-del":
			m.del = true
		default:
			if !m.seen[col] {
				m.seen[col] = true
				m.cols = append(m.cols, col)
			}
		}
	}
	rows.Close()
	if len(order) == 0 {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM temp.__ployz_pending`); err != nil {
		return nil, fmt.Errorf("clear captured changes: %w", err)
	}
	cs := &Changeset{Site: e.site, Version: e.version + 1, LastVersion: e.version + 1}
	for _, k := range order {
		if err := e.captureRow(ctx, tx, cs, k, marks[k]); err != nil {
			return nil, err
		}
	}
	if len(cs.Changes) == 0 {
		return nil, nil
	}
	return cs, nil
}

func (e *Engine) captureRow(ctx context.Context, tx execer, cs *Changeset, k rowKey, m *rowMarks) (err error) {
	t := e.schema.Load().Tables[k.tbl]
	clocks, err := loadClocks(ctx, tx, k.tbl, k.pk)
	if err != nil {
		return err
	}
	cl := clocks[SentinelCol].ver
	vals, exists, err := readRow(ctx, tx, t, k.pk)
	if err != nil {
		return err
	}
	// Clocks are written in one statement after the switch: one
	// statement per column was most of the cost of capturing a row.
	var cols []string
	var stamps []clock
	stamp := func(col string, ver int64, val Value) error {
		c := clock{ver: ver, site: e.site, dbv: cs.Version, seq: int64(len(cs.Changes))}
		cols, stamps = append(cols, col), append(stamps, c)
		cs.Changes = append(cs.Changes, Change{Table: k.tbl, PK: k.pk, Col: col, Val: val, ColVersion: ver, CL: cl, Seq: c.seq})
		return nil
	}
	defer func() {
		if err == nil {
			err = putClocks(ctx, tx, k.tbl, k.pk, cols, stamps)
		}
	}()
	switch {
	case exists && (cl%2 == 0 || m.del):
		// A new life of the row: insert, or delete and re-insert.
		if cl%2 == 0 {
			cl++
		} else {
			cl += 2
		}
		if err := dropColumnClocks(ctx, tx, k.tbl, k.pk); err != nil {
			return err
		}
		if err := stamp(SentinelCol, cl, Value{}); err != nil {
			return err
		}
		for _, c := range t.Cols {
			if err := stamp(c, 1, vals[c]); err != nil {
				return err
			}
		}
	case exists:
		cols := m.cols
		if m.ins {
			cols = t.Cols // INSERT OR REPLACE over a live row rewrites every column
		}
		for _, c := range cols {
			if err := stamp(c, clocks[c].ver+1, vals[c]); err != nil {
				return err
			}
		}
	case cl%2 == 1:
		cl++
		if err := dropColumnClocks(ctx, tx, k.tbl, k.pk); err != nil {
			return err
		}
		return stamp(SentinelCol, cl, Value{})
	}
	return nil
}
