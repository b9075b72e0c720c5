package crdt

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Apply merges changesets received from peers in one local transaction.
// Versions already in the book are skipped, so delivery may repeat and
// arrive in any order. This node's own versions are accepted too when its
// book lacks them: that is how it takes back what power loss rolled back
// after peers had received it. It returns how many changesets were newly
// applied.
func (e *Engine) Apply(ctx context.Context, css []Changeset) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, fmt.Errorf("store is closed")
	}
	tx := e.wc
	if err := tx.begin(ctx); err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			tx.rollback()
		}
	}()
	book := e.book.Clone()
	touched := map[string]bool{}
	var applied []Changeset
	for _, cs := range css {
		if cs.LastVersion < cs.Version {
			cs.LastVersion = cs.Version
		}
		if book.Has(cs.Site, cs.Version, cs.LastVersion) {
			continue
		}
		if err := e.checkKnown(cs); err != nil {
			// Schema is not replicated: leave the version unbooked so
			// anti-entropy pulls it again once this node's schema has it.
			e.log.Warn("skipping changeset for unknown schema", "site", cs.Site, "version", cs.Version, "error", err)
			continue
		}
		if err := e.mergeChangeset(ctx, tx, cs); err != nil {
			return 0, err
		}
		book.Add(cs.Site, cs.Version, cs.LastVersion)
		touched[cs.Site] = true
		applied = append(applied, cs)
	}
	if len(applied) == 0 {
		tx.rollback()
		done = true
		return 0, nil
	}
	for site := range touched {
		if err := persistBook(ctx, tx, book, site); err != nil {
			return 0, err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM temp.__ployz_pending`); err != nil {
		return 0, fmt.Errorf("clear captured merge writes: %w", err)
	}
	if err := tx.commit(ctx); err != nil {
		return 0, err
	}
	done = true
	e.book = book
	e.fire(Commit{Tables: tablesOf(applied...), Changesets: applied})
	return len(applied), nil
}

func (e *Engine) checkKnown(cs Changeset) error {
	for _, c := range cs.Changes {
		t := e.schema.Load().Tables[c.Table]
		if t == nil {
			return fmt.Errorf("unknown table %s", c.Table)
		}
		if c.Col != SentinelCol && !contains(t.Cols, c.Col) {
			return fmt.Errorf("table %s: unknown column %s", c.Table, c.Col)
		}
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (e *Engine) mergeChangeset(ctx context.Context, tx execer, cs Changeset) error {
	var order []rowKey
	byRow := map[rowKey][]Change{}
	for _, c := range cs.Changes {
		k := rowKey{c.Table, c.PK}
		if _, ok := byRow[k]; !ok {
			order = append(order, k)
		}
		byRow[k] = append(byRow[k], c)
	}
	for _, k := range order {
		chs := byRow[k]
		// Existence first: column cells only apply within the row's life.
		sort.SliceStable(chs, func(i, j int) bool { return chs[i].Col == SentinelCol && chs[j].Col != SentinelCol })
		if err := e.mergeRow(ctx, tx, e.schema.Load().Tables[k.tbl], k.pk, chs, cs); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) mergeRow(ctx context.Context, tx execer, t *Table, pk string, chs []Change, cs Changeset) error {
	clocks, err := loadClocks(ctx, tx, t.Name, pk)
	if err != nil {
		return err
	}
	keys, err := decodePK(pk)
	if err != nil {
		return err
	}
	localCL := clocks[SentinelCol].ver
	var vals map[string]Value
	for _, ch := range chs {
		origin := clock{site: cs.Site, dbv: cs.Version, seq: ch.Seq}
		if ch.CL < localCL {
			continue // stale: the row moved on to a later life or death
		}
		if ch.CL > localCL {
			if err := e.newLife(ctx, tx, t, pk, keys, ch.CL); err != nil {
				return err
			}
			origin.ver = ch.CL
			if err := putClock(ctx, tx, t.Name, pk, SentinelCol, origin); err != nil {
				return err
			}
			localCL = ch.CL
			clocks = map[string]clock{SentinelCol: origin}
			vals = nil
			if ch.Col == SentinelCol {
				continue
			}
		}
		if ch.Col == SentinelCol {
			// Same life announced by two origins: keep a deterministic tag.
			if cur := clocks[SentinelCol]; cs.Site > cur.site {
				origin.ver = ch.CL
				if err := putClock(ctx, tx, t.Name, pk, SentinelCol, origin); err != nil {
					return err
				}
				clocks[SentinelCol] = origin
			}
			continue
		}
		if localCL%2 == 0 {
			continue
		}
		if vals == nil {
			v, ok, err := readRow(ctx, tx, t, pk)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("table %s row %s: live causal length %d but no row", t.Name, pk, localCL)
			}
			vals = v
		}
		if cur, ok := clocks[ch.Col]; ok && !wins(ch.ColVersion, ch.Val, cs.Site, cur.ver, vals[ch.Col], cur.site) {
			continue
		}
		q := "UPDATE " + quote(t.Name) + " SET " + quote(ch.Col) + "=? WHERE " + pkWhere(t)
		if _, err := tx.ExecContext(ctx, q, append([]any{ch.Val.Any()}, keys...)...); err != nil {
			return fmt.Errorf("table %s row %s column %s: merge: %w", t.Name, pk, ch.Col, err)
		}
		origin.ver = ch.ColVersion
		if err := putClock(ctx, tx, t.Name, pk, ch.Col, origin); err != nil {
			return err
		}
		clocks[ch.Col] = origin
		vals[ch.Col] = ch.Val
	}
	return nil
}

// newLife moves a row to causal length cl: deleted when even, recreated
// with column defaults when odd (its cells then arrive as column changes).
func (e *Engine) newLife(ctx context.Context, tx execer, t *Table, pk string, keys []any, cl int64) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+quote(t.Name)+" WHERE "+pkWhere(t), keys...); err != nil {
		return fmt.Errorf("table %s row %s: merge delete: %w", t.Name, pk, err)
	}
	if err := dropColumnClocks(ctx, tx, t.Name, pk); err != nil {
		return err
	}
	if cl%2 == 0 {
		return nil
	}
	cols := make([]string, len(t.PK))
	marks := make([]string, len(t.PK))
	for i, p := range t.PK {
		cols[i] = quote(p)
		marks[i] = "?"
	}
	q := "INSERT INTO " + quote(t.Name) + "(" + strings.Join(cols, ",") + ") VALUES(" + strings.Join(marks, ",") + ")"
	if _, err := tx.ExecContext(ctx, q, keys...); err != nil {
		return fmt.Errorf("table %s row %s: merge insert: %w", t.Name, pk, err)
	}
	return nil
}

// wins applies cr-sqlite's column order: column version, then value, then
// site id; it reports whether the incoming cell beats the local one.
func wins(inVer int64, inVal Value, inSite string, curVer int64, curVal Value, curSite string) bool {
	if inVer != curVer {
		return inVer > curVer
	}
	if c := Compare(inVal, curVal); c != 0 {
		return c > 0
	}
	return inSite > curSite
}
