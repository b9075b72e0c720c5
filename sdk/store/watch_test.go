package store

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatch follows one query: it wakes once when its subscription opens,
// on a change to the columns the query selects and never on another
// column's change, and still wakes on a change after the store
// restarted (the subscription resumes on its own meanwhile).
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := startServer(t)
	c := srv.client()
	do := func(f func(*Client) error) error { return f(c) }
	w := NewWatch(ctx, do, []string{`SELECT id, json_extract(body, '$.state') FROM containers`}, nil)
	wake := func(what string) {
		t.Helper()
		select {
		case <-w.C:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake within 10s: %s", what)
		}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case <-w.C:
			t.Fatalf("woken by %s", what)
		case <-time.After(300 * time.Millisecond):
		}
	}
	exec := func(q string) {
		t.Helper()
		if _, err := c.Exec(ctx, Stmt(q)); err != nil {
			t.Fatal(err)
		}
	}
	wake("subscription opened")
	if !w.Live() {
		t.Fatal("not live after its subscription opened")
	}
	exec(`INSERT INTO containers (id, owner, body) VALUES ('c1', 'm1', '{"state":"running","ip":"10.0.0.2"}')`)
	wake("a new row")
	exec(`UPDATE containers SET body = '{"state":"running","ip":"10.0.0.3"}' WHERE id = 'c1'`)
	quiet("a column the query does not select")
	exec(`UPDATE containers SET body = '{"state":"exited","ip":"10.0.0.3"}' WHERE id = 'c1'`)
	wake("a selected column's change")

	srv.Stop()
	srv.Restart()
	exec(`UPDATE containers SET body = '{"state":"running","ip":"10.0.0.3"}' WHERE id = 'c1'`)
	wake("a change after the restart")
}

// TestWatchNotLiveWhileRefused: a subscription the store refuses leaves
// the Watch not live (its reader polls) and is tried again.
func TestWatchNotLiveWhileRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startServer(t).client()
	var tries atomic.Int32
	do := func(f func(*Client) error) error { tries.Add(1); return f(c) }
	w := NewWatch(ctx, do, []string{`SELECT id, body FROM containers`, `SELECT id FROM no_such_table`}, nil)
	time.Sleep(time.Second)
	if w.Live() {
		t.Fatal("live although the store refused one subscription")
	}
	if n := tries.Load(); n < 3 {
		t.Fatalf("%d subscription attempts in 1s; the refused one is not retried", n)
	}
}
