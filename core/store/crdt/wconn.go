package crdt

import (
	"context"
	"database/sql"
	"fmt"
)

// wconn runs the engine's own statements on the writer connection with a
// cache of prepared statements: preparing dominated the cost of a small
// write. Only engine-generated SQL (a bounded set) goes through the cache;
// user statements are executed directly.
type wconn struct {
	c     *sql.Conn
	cache map[string]*sql.Stmt
}

func (w *wconn) prep(ctx context.Context, q string) (*sql.Stmt, error) {
	if st := w.cache[q]; st != nil {
		return st, nil
	}
	st, err := w.c.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	w.cache[q] = st
	return st, nil
}

// ExecContext runs a cached statement.
func (w *wconn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := w.prep(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext runs a cached query.
func (w *wconn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := w.prep(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext runs a cached single-row query.
func (w *wconn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := w.prep(ctx, q)
	if err != nil {
		// Surface the prepare error through Scan like database/sql does.
		return w.c.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// reset drops cached statements (after a schema change).
func (w *wconn) reset() {
	for _, st := range w.cache {
		st.Close()
	}
	w.cache = map[string]*sql.Stmt{}
}

// begin opens a write transaction on the writer connection. IMMEDIATE takes
// the write lock up front so a busy database fails here, not mid-way.
func (w *wconn) begin(ctx context.Context) error {
	if _, err := w.c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	return nil
}

func (w *wconn) commit(ctx context.Context) error {
	if _, err := w.c.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// rollback aborts the open transaction, if any; it ignores the caller's
// context so a cancelled request still leaves the connection clean.
func (w *wconn) rollback() {
	_, _ = w.c.ExecContext(context.Background(), "ROLLBACK")
}
