package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func next(t *testing.T, s *Subscription) Event {
	t.Helper()
	select {
	case ev, ok := <-s.Events:
		if !ok {
			t.Fatalf("subscription ended: %v", s.Err())
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no subscription event within 10s")
	}
	return Event{}
}

func noEvent(t *testing.T, s *Subscription) {
	t.Helper()
	select {
	case ev := <-s.Events:
		t.Fatalf("unexpected event %+v", ev)
	case <-time.After(150 * time.Millisecond):
	}
}

// TestSubscriptionExactChangesAndResume writes a scripted sequence and
// checks the subscription sees exactly the result-set changes, in order,
// with contiguous change ids — across a client reconnect and a server
// restart.
func TestSubscriptionExactChangesAndResume(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := srv.client()
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := c.Exec(ctx, Stmt(q, args...)); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(`INSERT INTO containers (id, owner, body) VALUES ('c1', 'm1', '{"state":"running"}')`)
	mustExec(`INSERT INTO containers (id, owner, body) VALUES ('x1', 'm2', '{}')`)
	q := Stmt(`SELECT id, body FROM containers WHERE owner = ?`, "m1")
	sub, err := c.Subscribe(ctx, q, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !reflect.DeepEqual(sub.Columns, []string{"id", "body"}) {
		t.Fatalf("columns %v", sub.Columns)
	}
	if ev := next(t, sub); ev.Kind != EventRow || ev.RowID != 1 || ev.Values[0] != "c1" {
		t.Fatalf("snapshot row %+v", ev)
	}
	if ev := next(t, sub); ev.Kind != EventEOQ || ev.ChangeID != 0 {
		t.Fatalf("eoq %+v", ev)
	}
	var id int64
	expect := func(kind string, rowID int64, vals ...any) {
		t.Helper()
		id++
		ev := next(t, sub)
		want := Event{Kind: EventChange, ChangeKind: kind, RowID: rowID, Values: vals, ChangeID: id}
		if !reflect.DeepEqual(ev, want) {
			t.Fatalf("got %+v\nwant %+v", ev, want)
		}
	}
	mustExec(`UPDATE containers SET body = '{"state":"stopped"}' WHERE id = 'c1'`)
	expect("update", 1, "c1", `{"state":"stopped"}`)
	mustExec(`UPDATE containers SET body = '{"a":1}' WHERE id = 'x1'`) // outside the result set
	noEvent(t, sub)
	mustExec(`INSERT INTO containers (id, owner) VALUES ('c2', 'm1')`)
	expect("insert", 2, "c2", "{}")
	mustExec(`UPDATE containers SET owner = 'm2' WHERE id = 'c1'`) // leaves the result set
	expect("delete", 1, "c1", `{"state":"stopped"}`)
	mustExec(`DELETE FROM containers WHERE id = 'c2'`)
	expect("delete", 2, "c2", "{}")
	mustExec(`INSERT INTO containers (id, owner) VALUES ('c2', 'm1')`) // re-insert: a new row id
	expect("insert", 3, "c2", "{}")

	// Client-side disconnect: a second client resumes from a change id and
	// gets exactly the later changes, then live ones.
	raw, err := c.Subscribe(ctx, q, SubscribeOptions{SkipRows: true})
	if err != nil {
		t.Fatal(err)
	}
	if raw.ID != sub.ID {
		t.Fatalf("identical query got a new subscription %s != %s", raw.ID, sub.ID)
	}
	raw.Close()
	if got, err := c.resumeRaw(ctx, sub.ID, 3); err != nil || !reflect.DeepEqual(got, []string{"delete", "insert"}) {
		t.Fatalf("resume from 3: %v %v", got, err)
	}

	// Server restart: the live subscription reconnects with ?from= and
	// neither misses nor repeats a change.
	srv.Stop()
	time.Sleep(100 * time.Millisecond)
	srv.Restart()
	mustExec(`UPDATE containers SET body = '{"v":2}' WHERE id = 'c2'`)
	expect("update", 3, "c2", `{"v":2}`)
	mustExec(`INSERT INTO containers (id, owner) VALUES ('c3', 'm1')`)
	expect("insert", 4, "c3", "{}")
	noEvent(t, sub)
	if sub.LastChangeID() != id {
		t.Fatalf("last change id %d want %d", sub.LastChangeID(), id)
	}

	// Replay after the restart comes from the persisted change log.
	replay, err := c.resumeRaw(ctx, sub.ID, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"insert", "update", "insert"}
	if !reflect.DeepEqual(replay, want) {
		t.Fatalf("replay after change 4: %v want %v", replay, want)
	}
}

// TestSubscriptionGone checks a resume the server answers 404 (the
// subscription was dropped while nobody listened) ends the subscription
// with ErrSubscriptionGone, and that SkipRows delivers columns and eoq
// but no rows, then changes.
func TestSubscriptionGone(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := srv.client()
	if _, err := c.Exec(ctx, Stmt(`INSERT INTO volumes (id) VALUES ('v0')`)); err != nil {
		t.Fatal(err)
	}
	skip, err := c.Subscribe(ctx, Stmt(`SELECT id FROM volumes`), SubscribeOptions{SkipRows: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(skip.Columns, []string{"id"}) {
		t.Fatalf("columns %v", skip.Columns)
	}
	if ev := next(t, skip); ev.Kind != EventEOQ || ev.ChangeID != 0 {
		t.Fatalf("first SkipRows event %+v, want eoq 0 (no row)", ev)
	}
	if _, err := c.Exec(ctx, Stmt(`INSERT INTO volumes (id) VALUES ('v1')`)); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, skip); ev.Kind != EventChange || ev.ChangeKind != "insert" || ev.ChangeID != 1 || ev.Values[0] != "v1" {
		t.Fatalf("SkipRows event %+v, want insert 1 of v1", ev)
	}
	srv.Stop()
	// The subscription state is gone, as after the idle drop.
	if err := os.Remove(filepath.Join(filepath.Dir(srv.DBPath()), "subscriptions.db")); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	select {
	case _, ok := <-skip.Events:
		if ok {
			t.Fatal("event after the subscription was dropped")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscription did not end")
	}
	if err := skip.Err(); !errors.Is(err, ErrSubscriptionGone) {
		t.Fatalf("Err() = %v, want ErrSubscriptionGone", err)
	}
}
