package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Row is one row of a replicated table: the key, the Machine that wrote
// it, its JSON body and when it was written (unix milliseconds).
type Row[B any] struct {
	Key       string
	Owner     string
	Body      B
	UpdatedAt int64
	// Raw is the body exactly as stored (set when read), for readers
	// that verify a signature over it; writers leave it empty.
	Raw string
}

// Table gives typed access to one replicated table. Bodies are read
// tolerantly: unknown fields are ignored and missing ones keep their zero
// value (or whatever Defaults sets), so a newer Machine's rows stay readable.
type Table[B any] struct {
	c    *Client
	name string
	key  string
}

// Defaulter lets a body type fill fields missing from an older writer.
type Defaulter interface{ Defaults() }

// NewTable gives typed access to the table name keyed by column key: the
// tables below are the ones a plugin reads or writes; ployzd's own
// (core/store) are made the same way.
func NewTable[B any](c *Client, name, key string) Table[B] { return Table[B]{c, name, key} }

// Machines is the Machines table, one row per Machine.
func (c *Client) Machines() Table[MachineBody] { return Table[MachineBody]{c, "machines", "id"} }

// Containers is the Containers table.
func (c *Client) Containers() Table[ContainerBody] {
	return Table[ContainerBody]{c, "containers", "id"}
}

// Certificates is the name-keyed, last-writer-wins certificates table.
func (c *Client) Certificates() Table[CertificateBody] {
	return Table[CertificateBody]{c, "certificates", "name"}
}

// Serving is the Serving Pointer table, one row per Service keyed by
// "namespace/service" (lowercase), last writer wins.
func (c *Client) Serving() Table[ServingBody] { return Table[ServingBody]{c, "serving", "id"} }

// ServingAcks is the table of Ingress Proxy acks, one row per Machine.
func (c *Client) ServingAcks() Table[ServingAckBody] {
	return Table[ServingAckBody]{c, "serving_acks", "id"}
}

// Name is the table's SQL name.
func (t Table[B]) Name() string { return t.name }

// Where returns the rows a clause selects: what follows the table in
// "SELECT key, owner, body, updated_at FROM table" (WHERE, ORDER BY,
// LIMIT), with its parameters.
func (t Table[B]) Where(ctx context.Context, clause string, params ...any) ([]Row[B], error) {
	return t.query(ctx, Stmt(t.selectSQL()+" "+clause, params...))
}

// Key is the table's key column.
func (t Table[B]) Key() string { return t.key }

func (t Table[B]) selectSQL() string {
	return fmt.Sprintf(`SELECT %s, owner, body, updated_at FROM %s`, t.key, t.name)
}

// List returns every row, ordered by key.
func (t Table[B]) List(ctx context.Context) ([]Row[B], error) {
	return t.query(ctx, Stmt(t.selectSQL()+" ORDER BY "+t.key))
}

// ListByOwner returns the rows written by one Machine.
func (t Table[B]) ListByOwner(ctx context.Context, owner string) ([]Row[B], error) {
	return t.query(ctx, Stmt(t.selectSQL()+" WHERE owner = ? ORDER BY "+t.key, owner))
}

// Get returns one row; ok is false when it does not exist.
func (t Table[B]) Get(ctx context.Context, key string) (row Row[B], ok bool, err error) {
	rows, err := t.query(ctx, Stmt(t.selectSQL()+" WHERE "+t.key+" = ?", key))
	if err != nil || len(rows) == 0 {
		return row, false, err
	}
	return rows[0], true, nil
}

// Put inserts or replaces a row; UpdatedAt defaults to now.
func (t Table[B]) Put(ctx context.Context, r Row[B]) (*ExecResult, error) {
	body, err := json.Marshal(r.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: encode body: %w", t.name, r.Key, err)
	}
	if r.UpdatedAt == 0 {
		r.UpdatedAt = time.Now().UnixMilli()
	}
	q := fmt.Sprintf(`INSERT INTO %s (%s, owner, body, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT(%s) DO UPDATE SET owner = excluded.owner, body = excluded.body, updated_at = excluded.updated_at`,
		t.name, t.key, t.key)
	res, err := t.c.Exec(ctx, Stmt(q, r.Key, r.Owner, string(body), r.UpdatedAt))
	if err != nil {
		return nil, fmt.Errorf("%s %s: put: %w", t.name, r.Key, err)
	}
	return res, nil
}

// Delete removes a row (a tombstone replicates the delete).
func (t Table[B]) Delete(ctx context.Context, key string) (*ExecResult, error) {
	res, err := t.c.Exec(ctx, Stmt(fmt.Sprintf(`DELETE FROM %s WHERE %s = ?`, t.name, t.key), key))
	if err != nil {
		return nil, fmt.Errorf("%s %s: delete: %w", t.name, key, err)
	}
	return res, nil
}

func (t Table[B]) query(ctx context.Context, st Statement) ([]Row[B], error) {
	rs, err := t.c.Query(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	out := make([]Row[B], 0, len(rs.Rows))
	for _, vals := range rs.Rows {
		r, err := DecodeRow[B](t.name, vals)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// DecodeRow turns [key, owner, body, updated_at] values (from a query or a
// subscription event) into a typed row, reading the body tolerantly.
func DecodeRow[B any](table string, vals []any) (Row[B], error) {
	var r Row[B]
	if len(vals) != 4 {
		return r, fmt.Errorf("%s: row has %d values, want 4", table, len(vals))
	}
	r.Key, _ = vals[0].(string)
	r.Owner, _ = vals[1].(string)
	r.UpdatedAt, _ = vals[3].(int64)
	body, _ := vals[2].(string)
	r.Raw = body
	if body == "" {
		body = "{}"
	}
	if err := json.Unmarshal([]byte(body), &r.Body); err != nil {
		return r, fmt.Errorf("%s %s: body is not a JSON object: %w", table, r.Key, err)
	}
	if d, ok := any(&r.Body).(Defaulter); ok {
		d.Defaults()
	}
	return r, nil
}
