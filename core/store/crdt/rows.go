package crdt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

type clock struct {
	ver  int64
	site string
	dbv  int64
	seq  int64
}

type execer interface {
	querier2
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func loadClocks(ctx context.Context, tx execer, tbl, pk string) (map[string]clock, error) {
	rows, err := tx.QueryContext(ctx, `SELECT col, ver, site, dbv, seq FROM __ployz_clock WHERE tbl=? AND pk=?`, tbl, pk)
	if err != nil {
		return nil, fmt.Errorf("table %s row %s: load clocks: %w", tbl, pk, err)
	}
	defer rows.Close()
	out := map[string]clock{}
	for rows.Next() {
		var col string
		var c clock
		if err := rows.Scan(&col, &c.ver, &c.site, &c.dbv, &c.seq); err != nil {
			return nil, fmt.Errorf("table %s row %s: load clocks: %w", tbl, pk, err)
		}
		out[col] = c
	}
	return out, rows.Err()
}

func putClock(ctx context.Context, tx execer, tbl, pk, col string, c clock) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO __ployz_clock(tbl,pk,col,ver,site,dbv,seq) VALUES(?,?,?,?,?,?,?)
		ON CONFLICT(tbl,pk,col) DO UPDATE SET ver=excluded.ver, site=excluded.site, dbv=excluded.dbv, seq=excluded.seq`,
		tbl, pk, col, c.ver, c.site, c.dbv, c.seq)
	if err != nil {
		return fmt.Errorf("table %s row %s column %s: store clock: %w", tbl, pk, col, err)
	}
	return nil
}

// putClocks stores several clocks of one row in one statement.
func putClocks(ctx context.Context, tx execer, tbl, pk string, cols []string, cs []clock) error {
	if len(cols) == 0 {
		return nil
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO __ployz_clock(tbl,pk,col,ver,site,dbv,seq) VALUES`)
	args := make([]any, 0, 7*len(cols))
	for i, col := range cols {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(`(?,?,?,?,?,?,?)`)
		c := cs[i]
		args = append(args, tbl, pk, col, c.ver, c.site, c.dbv, c.seq)
	}
	q.WriteString(` ON CONFLICT(tbl,pk,col) DO UPDATE SET ver=excluded.ver, site=excluded.site, dbv=excluded.dbv, seq=excluded.seq`)
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("table %s row %s: store clocks of %v: %w", tbl, pk, cols, err)
	}
	return nil
}

func dropColumnClocks(ctx context.Context, tx execer, tbl, pk string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM __ployz_clock WHERE tbl=? AND pk=? AND col<>?`, tbl, pk, SentinelCol); err != nil {
		return fmt.Errorf("table %s row %s: drop clocks: %w", tbl, pk, err)
	}
	return nil
}

func pkWhere(t *Table) string {
	parts := make([]string, len(t.PK))
	for i, p := range t.PK {
		parts[i] = quote(p) + "=?"
	}
	return strings.Join(parts, " AND ")
}

// readRow returns the row's stored non-key column values, or ok=false when
// the row does not exist.
func readRow(ctx context.Context, tx execer, t *Table, pk string) (map[string]Value, bool, error) {
	keys, err := decodePK(pk)
	if err != nil {
		return nil, false, err
	}
	sel := "1"
	if len(t.Cols) > 0 {
		qs := make([]string, len(t.Cols))
		for i, c := range t.Cols {
			qs[i] = quote(c)
		}
		sel = "1," + strings.Join(qs, ",")
	}
	dest := make([]any, len(t.Cols)+1)
	ptrs := make([]any, len(dest))
	for i := range dest {
		ptrs[i] = &dest[i]
	}
	err = tx.QueryRowContext(ctx, "SELECT "+sel+" FROM "+quote(t.Name)+" WHERE "+pkWhere(t), keys...).Scan(ptrs...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("table %s row %s: read: %w", t.Name, pk, err)
	}
	out := make(map[string]Value, len(t.Cols))
	for i, c := range t.Cols {
		out[c] = FromAny(dest[i+1])
	}
	return out, true, nil
}
