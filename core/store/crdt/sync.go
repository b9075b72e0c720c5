package crdt

import (
	"context"
	"fmt"
)

// ChangesFor returns the surviving effects of versions lo..hi of site, read
// from one snapshot. Versions with no surviving cells come back as cleared
// ranges so the requester can close its gap.
func (e *Engine) ChangesFor(ctx context.Context, site string, lo, hi int64) ([]Changeset, error) {
	schema := e.Schema()
	tx, err := e.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin sync read: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT tbl, pk, col, ver, dbv, seq FROM __ployz_clock
		WHERE site=? AND dbv BETWEEN ? AND ? ORDER BY dbv, seq`, site, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("site %s versions %d-%d: read clocks: %w", site, lo, hi, err)
	}
	type cell struct {
		tbl, pk, col  string
		ver, dbv, seq int64
	}
	var cells []cell
	for rows.Next() {
		var c cell
		if err := rows.Scan(&c.tbl, &c.pk, &c.col, &c.ver, &c.dbv, &c.seq); err != nil {
			rows.Close()
			return nil, fmt.Errorf("site %s: read clocks: %w", site, err)
		}
		cells = append(cells, c)
	}
	rows.Close()
	type rowState struct {
		cl   int64
		vals map[string]Value
	}
	cache := map[rowKey]*rowState{}
	var out []Changeset
	next := lo
	flushCleared := func(upTo int64) {
		if upTo >= next {
			out = append(out, Changeset{Site: site, Version: next, LastVersion: upTo})
		}
	}
	for _, c := range cells {
		if len(out) == 0 || out[len(out)-1].Version != c.dbv {
			flushCleared(c.dbv - 1)
			out = append(out, Changeset{Site: site, Version: c.dbv, LastVersion: c.dbv})
			next = c.dbv + 1
		}
		k := rowKey{c.tbl, c.pk}
		st := cache[k]
		if st == nil {
			st = &rowState{}
			t := schema.Tables[c.tbl]
			if t == nil {
				return nil, fmt.Errorf("clock names unknown table %s", c.tbl)
			}
			if err := tx.QueryRowContext(ctx, `SELECT ver FROM __ployz_clock WHERE tbl=? AND pk=? AND col=?`, c.tbl, c.pk, SentinelCol).Scan(&st.cl); err != nil {
				return nil, fmt.Errorf("table %s row %s: read causal length: %w", c.tbl, c.pk, err)
			}
			if st.cl%2 == 1 {
				st.vals, _, err = readRow(ctx, tx, t, c.pk)
				if err != nil {
					return nil, err
				}
			}
			cache[k] = st
		}
		ch := Change{Table: c.tbl, PK: c.pk, Col: c.col, ColVersion: c.ver, CL: st.cl, Seq: c.seq}
		if c.col != SentinelCol {
			ch.Val = st.vals[c.col]
		}
		last := &out[len(out)-1]
		last.Changes = append(last.Changes, ch)
	}
	flushCleared(hi)
	return out, nil
}
