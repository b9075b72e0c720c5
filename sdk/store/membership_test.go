package store

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestFollowMembershipWakesOnDownChanges: the watch wakes when the set of
// down members changes (down, then up again), not for a change of the
// other states.
func TestFollowMembershipWakesOnDownChanges(t *testing.T) {
	var answer atomic.Value
	answer.Store(`{"members":[{"site":"a","state":"up"},{"site":"b","state":"up"}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/membership" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(answer.Load().(string)))
	}))
	defer srv.Close()
	c := New(srv.URL)
	do := func(f func(*Client) error) error { return f(c) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWatch(ctx, do, nil, nil)
	w.FollowMembership(ctx, do, 10*time.Millisecond, nil)
	woke := func() bool {
		select {
		case <-w.C:
			return true
		case <-time.After(300 * time.Millisecond):
			return false
		}
	}
	if woke() {
		t.Fatal("woke with nothing down")
	}
	answer.Store(`{"members":[{"site":"a","state":"suspect"},{"site":"b","state":"up"}]}`)
	if woke() {
		t.Fatal("woke for a suspect member")
	}
	answer.Store(`{"members":[{"site":"a","state":"down","later":1},{"site":"b","state":"up"}],"later":true}`)
	if !woke() {
		t.Fatal("did not wake when a went down")
	}
	answer.Store(`{"members":[{"site":"a","state":"up"},{"site":"b","state":"up"}]}`)
	if !woke() {
		t.Fatal("did not wake when a came back")
	}
}

// TestFollowMembershipWithoutAView: a store that answers 404 (no
// membership view) is asked again only every withoutViewEvery, and once
// it answers (upgraded) a down member wakes the watch.
func TestFollowMembershipWithoutAView(t *testing.T) {
	defer func(d time.Duration) { withoutViewEvery = d }(withoutViewEvery)
	withoutViewEvery = 400 * time.Millisecond
	var asked atomic.Int32
	var upgraded atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if upgraded.Load() {
			w.Write([]byte(`{"members":[{"site":"a","state":"down"}]}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	c := New(srv.URL)
	if _, err := c.Membership(context.Background()); err != ErrNoMembership {
		t.Fatalf("Membership from a store without it: %v, want ErrNoMembership", err)
	}
	// A plugin's client keeps its connection to such a store.
	tf := NewTokenFileClient(srv.URL, "")
	if _, err := tf.Membership(context.Background()); err != ErrNoMembership || tf.c == nil {
		t.Fatalf("TokenFileClient.Membership: %v (client kept: %v), want ErrNoMembership and the client kept", err, tf.c != nil)
	}
	asked.Store(1) // as if only the test above had asked
	do := func(f func(*Client) error) error { return f(c) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWatch(ctx, do, nil, nil)
	w.FollowMembership(ctx, do, 10*time.Millisecond, nil)
	time.Sleep(200 * time.Millisecond)
	if n := asked.Load(); n != 2 {
		t.Fatalf("asked %d times in 200 ms, want 2 (the test's, then the follower's once)", n)
	}
	upgraded.Store(true)
	select {
	case <-w.C:
	case <-time.After(2 * time.Second):
		t.Fatal("the upgraded store's down member did not wake the watch")
	}
}

// TestFollowMembershipHeldReads: against a store that waits, an idle
// reader asks once per change or per wait instead of every interval,
// and a change still wakes the watch.
func TestFollowMembershipHeldReads(t *testing.T) {
	defer func(w time.Duration) { membershipWait = w }(membershipWait)
	membershipWait = time.Second
	var down atomic.Value
	down.Store("")
	changed := make(chan struct{})
	var asks atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asks.Add(1)
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		if r.URL.Query().Get("down") == down.Load().(string) {
			select {
			case <-changed:
			case <-time.After(wait):
			case <-r.Context().Done():
			}
		}
		state := "up"
		if down.Load().(string) == "a" {
			state = "down"
		}
		w.Write([]byte(`{"members":[{"site":"a","state":"` + state + `"}],"waits":true}`))
	}))
	defer srv.Close()
	c := New(srv.URL)
	do := func(f func(*Client) error) error { return f(c) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWatch(ctx, do, nil, nil)
	w.FollowMembership(ctx, do, 10*time.Millisecond, nil)
	time.Sleep(2500 * time.Millisecond)
	if n := asks.Load(); n > 4 {
		t.Fatalf("%d reads in 2.5 s with a 1 s wait, want at most 4 (a 10 ms interval would make ~250)", n)
	}
	down.Store("a")
	close(changed)
	select {
	case <-w.C:
	case <-time.After(5 * time.Second):
		t.Fatal("a held read that answered a down member did not wake the watch")
	}
}
