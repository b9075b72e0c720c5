package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// StmtResult is one statement's outcome in a transaction.
type StmtResult struct {
	RowsAffected int64   `json:"rows_affected"`
	Time         float64 `json:"time"`
	Error        string  `json:"error,omitempty"`
}

// ExecResult is the answer to a transaction.
type ExecResult struct {
	Results []StmtResult `json:"results"`
	Time    float64      `json:"time"`
	Version *int64       `json:"version"` // nil when no replicated row changed
	ActorID string       `json:"actor_id,omitempty"`
}

// Exec runs statements in one write transaction, all or nothing.
func (c *Client) Exec(ctx context.Context, stmts ...Statement) (*ExecResult, error) {
	resp, err := c.do(ctx, "POST", "/v1/transactions", stmts)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	var out ExecResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode transaction result: %w", err)
	}
	for i, r := range out.Results {
		if r.Error != "" {
			return &out, fmt.Errorf("statement %d: %s", i, r.Error)
		}
	}
	return &out, nil
}

// Rows is a complete query result.
type Rows struct {
	Columns []string
	Rows    [][]any
}

// Query runs a read-only statement and collects every row.
func (c *Client) Query(ctx context.Context, st Statement) (*Rows, error) {
	resp, err := c.do(ctx, "POST", "/v1/queries", st)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	out := &Rows{}
	for {
		var ev rawEvent
		if err := dec.Decode(&ev); err != nil {
			return nil, fmt.Errorf("query stream ended before eoq: %w", err)
		}
		switch {
		case ev.Error != nil:
			return nil, fmt.Errorf("query failed: %s", *ev.Error)
		case ev.Columns != nil:
			out.Columns = ev.Columns
		case ev.Row != nil:
			_, vals, err := decodeRow(ev.Row)
			if err != nil {
				return nil, err
			}
			out.Rows = append(out.Rows, vals)
		case ev.EOQ != nil:
			return out, nil
		}
	}
}

// Health is the store's self-report.
type Health struct {
	Gaps      int64            `json:"gaps"`
	Members   int              `json:"members"`
	QueueSize int              `json:"queue_size"`
	ActorID   string           `json:"actor_id"`
	Vector    map[string]int64 `json:"vector"` // per-site head version
}

// Health reads /v1/health.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	resp, err := c.do(ctx, "GET", "/v1/health", nil)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	var v struct {
		Response Health `json:"response"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, fmt.Errorf("decode health: %w", err)
	}
	return &v.Response, nil
}

// WaitCaughtUp polls until the store has applied, for every site in target,
// all versions up to target's value (a joining Machine passes the vector it
// read from a peer). It returns ctx's error if that never happens.
func (c *Client) WaitCaughtUp(ctx context.Context, target map[string]int64, poll time.Duration) error {
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	for {
		h, err := c.Health(ctx)
		if err == nil {
			behind := behindOf(h.Vector, target)
			if len(behind) == 0 {
				return nil
			}
			err = fmt.Errorf("behind on %s", strings.Join(behind, ", "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for store to catch up: %w (last: %v)", ctx.Err(), err)
		case <-time.After(poll):
		}
	}
}

func behindOf(have, target map[string]int64) []string {
	var out []string
	for site, v := range target {
		if have[site] < v {
			out = append(out, site+" "+strconv.FormatInt(have[site], 10)+"/"+strconv.FormatInt(v, 10))
		}
	}
	return out
}
