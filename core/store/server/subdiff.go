package server

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
)

type resultRow struct {
	key  string
	vals json.RawMessage
}

// runQuery executes the subscription's query and keys each row by its
// identity: the primary keys of the tables it reads (the hidden leading
// columns, see identityQuery); failing that, the key columns of the one
// table it reads when they are selected; otherwise the whole row (then an
// update shows as a delete and an insert).
func (s *sub) runQuery(ctx context.Context) ([]string, []resultRow, error) {
	rows, err := s.m.eng.Query(ctx, s.runSQL, s.args...)
	if err != nil {
		return nil, nil, fmt.Errorf("subscription query: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, fmt.Errorf("subscription query columns: %w", err)
	}
	if s.hidden > 0 {
		if len(cols) < s.hidden {
			return nil, nil, fmt.Errorf("subscription query returned %d columns, fewer than its %d key columns", len(cols), s.hidden)
		}
		s.identity = make([]int, s.hidden)
		for i := range s.identity {
			s.identity[i] = i
		}
	} else if s.identity == nil && len(s.tables) == 1 {
		for name := range s.tables {
			s.identity = identityColumns(cols, s.m.eng.Schema().Tables[name].PK)
		}
	}
	var out []resultRow
	seen := map[string]int{}
	for rows.Next() {
		dest := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range dest {
			ptrs[i] = &dest[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, fmt.Errorf("subscription query row: %w", err)
		}
		for i := range dest {
			dest[i] = renderValue(dest[i])
		}
		vals := wireJSON(dest[s.hidden:])
		key := string(vals)
		if s.identity != nil {
			ids := make([]any, len(s.identity))
			for i, c := range s.identity {
				ids[i] = dest[c]
			}
			k := wireJSON(ids)
			key = string(k)
		}
		if n := seen[key]; n > 0 {
			seen[key] = n + 1
			key += "#" + strconv.Itoa(n)
		} else {
			seen[key] = 1
		}
		out = append(out, resultRow{key: key, vals: vals})
	}
	return cols[s.hidden:], out, rows.Err()
}

func identityColumns(cols, pk []string) []int {
	var idx []int
	for _, p := range pk {
		found := -1
		for i, c := range cols {
			if c == p {
				found = i
				break
			}
		}
		if found < 0 {
			return nil
		}
		idx = append(idx, found)
	}
	return idx
}

// recompute re-runs the query, diffs it against the materialised result,
// persists the resulting change events, then hands them to listeners — all
// under s.mu, so a listener attaching concurrently sees each event once.
func (s *sub) recompute(ctx context.Context) error { return s.refresh(ctx, false) }

// refresh is recompute; with initial set the rows form the snapshot a new
// subscription starts from, so they are stored without change events.
func (s *sub) refresh(ctx context.Context, initial bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cols, result, err := s.runQuery(ctx)
	if err != nil {
		return err
	}
	s.cols = cols
	changes := s.diff(result)
	if len(changes) == 0 {
		return nil
	}
	lines, last, err := s.persist(ctx, changes, initial)
	if err != nil {
		return err
	}
	s.last = last
	for _, c := range changes {
		if c.kind == "delete" {
			delete(s.rows, c.key)
		} else {
			s.rows[c.key] = c.row
		}
	}
	s.broadcast(lines)
	return nil
}

// subChange is one change event of a subscription's result.
type subChange struct {
	kind string
	key  string
	row  *srow
}

// diff compares a fresh result with the materialised one: inserts and
// updates in result order, then deletes, as Corrosion lists the changes
// of one commit. It records the new order.
func (s *sub) diff(result []resultRow) []subChange {
	var changes, deletes []subChange
	now := map[string]bool{}
	for _, r := range result {
		now[r.key] = true
	}
	for _, key := range s.order {
		if r := s.rows[key]; r != nil && !now[key] {
			deletes = append(deletes, subChange{"delete", key, r})
		}
	}
	if s.order == nil { // first run after restart: order was not persisted
		for key, r := range s.rows {
			if !now[key] {
				deletes = append(deletes, subChange{"delete", key, r})
			}
		}
		sort.Slice(deletes, func(i, j int) bool { return deletes[i].row.id < deletes[j].row.id })
	}
	order := make([]string, 0, len(result))
	for _, r := range result {
		order = append(order, r.key)
		old := s.rows[r.key]
		switch {
		case old == nil:
			changes = append(changes, subChange{"insert", r.key, &srow{id: s.nextRow, vals: r.vals}})
			s.nextRow++
		case string(old.vals) != string(r.vals):
			changes = append(changes, subChange{"update", r.key, &srow{id: old.id, vals: r.vals}})
		}
	}
	s.order = order
	return append(changes, deletes...)
}

// persist writes the changes (and, unless initial, their change events)
// in one transaction, returning the event lines and the last change id.
func (s *sub) persist(ctx context.Context, changes []subChange, initial bool) ([][]byte, int64, error) {
	tx, err := s.m.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("subscription %s: begin persist: %w", s.id, err)
	}
	defer tx.Rollback()
	lines := make([][]byte, 0, len(changes))
	last := s.last
	for _, c := range changes {
		if !initial {
			last++
			line := wireJSON(map[string]any{"change": []any{c.kind, c.row.id, c.row.vals, last}})
			lines = append(lines, line)
			if _, err := tx.ExecContext(ctx, `INSERT INTO sub_changes(sub,change_id,line) VALUES(?,?,?)`, s.id, last, string(line)); err != nil {
				return nil, 0, fmt.Errorf("subscription %s: persist change: %w", s.id, err)
			}
		}
		if c.kind == "delete" {
			_, err = tx.ExecContext(ctx, `DELETE FROM sub_rows WHERE sub=? AND key=?`, s.id, c.key)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO sub_rows(sub,key,row_id,vals) VALUES(?,?,?,?)
				ON CONFLICT(sub,key) DO UPDATE SET vals=excluded.vals`, s.id, c.key, c.row.id, string(c.row.vals))
		}
		if err != nil {
			return nil, 0, fmt.Errorf("subscription %s: persist row: %w", s.id, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM sub_changes WHERE sub=? AND change_id<=?`, s.id, last-changeRetention); err != nil {
		return nil, 0, fmt.Errorf("subscription %s: trim changes: %w", s.id, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE subs SET last_change=?, next_row=? WHERE id=?`, last, s.nextRow, s.id); err != nil {
		return nil, 0, fmt.Errorf("subscription %s: persist position: %w", s.id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, fmt.Errorf("subscription %s: commit: %w", s.id, err)
	}
	return lines, last, nil
}

// broadcast hands the event lines to every listener; one that cannot keep
// up is closed (it resumes from its last change id, as Corrosion's do).
func (s *sub) broadcast(lines [][]byte) {
	for l := range s.listeners {
		for _, line := range lines {
			select {
			case l.ch <- line:
			default:
				l.overflow = true
			}
			if l.overflow {
				break
			}
		}
		if l.overflow {
			close(l.ch)
			delete(s.listeners, l)
		}
	}
}

// attach registers a listener and returns the events to send before live
// ones, as Corrosion does: without from (or from=0) the snapshot —
// columns, rows and eoq with the last change id — unless skipRows, which
// sends nothing before live changes; with from > 0 only the retained
// change events after it. A from older than the retained log is an error.
func (s *sub) attach(ctx context.Context, from *int64, skipRows bool) ([][]byte, *listener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var backlog [][]byte
	switch {
	case (from == nil || *from == 0) && skipRows:
	case from == nil || *from == 0:
		start := time.Now()
		cols := wireJSON(map[string]any{"columns": s.cols})
		backlog = append(backlog, cols)
		for _, key := range s.order {
			r := s.rows[key]
			line := wireJSON(map[string]any{"row": []any{r.id, r.vals}})
			backlog = append(backlog, line)
		}
		last := s.last
		backlog = append(backlog, eoqLine(time.Since(start), &last))
	case *from < s.last:
		var oldest int64
		err := s.m.db.QueryRowContext(ctx, `SELECT coalesce(min(change_id),0) FROM sub_changes WHERE sub=?`, s.id).Scan(&oldest)
		if err != nil {
			return nil, nil, fmt.Errorf("subscription %s: read change log: %w", s.id, err)
		}
		if *from+1 < oldest {
			return nil, nil, fmt.Errorf("subscription already deleted older changes, min change id: %d", oldest)
		}
		rows, err := s.m.db.QueryContext(ctx, `SELECT line FROM sub_changes WHERE sub=? AND change_id>? ORDER BY change_id`, s.id, *from)
		if err != nil {
			return nil, nil, fmt.Errorf("subscription %s: read change log: %w", s.id, err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("subscription %s: read change log: %w", s.id, err)
			}
			backlog = append(backlog, []byte(line))
		}
		rows.Close()
	}
	l := &listener{ch: make(chan []byte, listenerBuffer)}
	s.listeners[l] = true
	s.idleSince = time.Time{}
	return backlog, l, nil
}

func (s *sub) detach(l *listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listeners[l] {
		delete(s.listeners, l)
		close(l.ch)
	}
	if len(s.listeners) == 0 {
		s.idleSince = time.Now()
	}
}
