package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSubscriptionLimits checks the cap on distinct subscriptions and that
// an unlistened subscription is dropped, persisted state included.
func TestSubscriptionLimits(t *testing.T) {
	n := startAPINode(t, "s", nil)
	n.subs.mu.Lock()
	n.subs.maxSubs = 2
	n.subs.mu.Unlock()
	open := func(q string) (*http.Response, string) {
		resp := doRequest(t, n, "s", "POST", "/v1/subscriptions", []byte(`"`+q+`"`))
		return resp, resp.Header.Get("corro-query-id")
	}
	r1, id1 := open("SELECT k FROM kv")
	r2, _ := open("SELECT v FROM kv")
	r3, _ := open("SELECT n FROM kv")
	b, _ := io.ReadAll(r3.Body)
	r3.Body.Close()
	if r3.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "subscription limit reached") {
		t.Fatalf("third subscription: %d %s, want 429 naming the limit", r3.StatusCode, b)
	}
	// An identical query reuses its subscription and is not refused.
	r4, id4 := open("SELECT  k  FROM kv")
	if r4.StatusCode != 200 || id4 != id1 {
		t.Fatalf("identical query: status %d id %s, want 200 and %s", r4.StatusCode, id4, id1)
	}
	r1.Body.Close()
	r2.Body.Close()
	r4.Body.Close()
	// Corrosion drops a subscription 10 minutes after its last listener left.
	time.Sleep(100 * time.Millisecond) // the closed streams detach
	n.subs.gc(time.Now().Add(9 * time.Minute))
	if n.subs.get(id1) == nil {
		t.Fatal("subscription dropped after 9 idle minutes, want 10")
	}
	waitFor(t, 10*time.Second, "idle subscriptions to be dropped", func() bool {
		n.subs.gc(time.Now().Add(10*time.Minute + time.Second))
		return n.subs.get(id1) == nil && len(n.subs.byID) == 0
	})
	resp := doRequest(t, n, "s", "GET", "/v1/subscriptions/"+id1, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("resume dropped subscription: status %d, want 404", resp.StatusCode)
	}
	var left int
	if err := n.subs.db.QueryRow(`SELECT count(*) FROM subs`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("persisted subscriptions after GC: %d (%v), want 0", left, err)
	}
	r5, _ := open("SELECT n FROM kv")
	r5.Body.Close()
	if r5.StatusCode != 200 {
		t.Fatalf("subscription after GC freed room: status %d", r5.StatusCode)
	}
}

// TestListenedSubscriptionKept checks a subscription with a connected
// listener is never collected, however long it has been quiet.
func TestListenedSubscriptionKept(t *testing.T) {
	n := startAPINode(t, "s", nil)
	resp := doRequest(t, n, "s", "POST", "/v1/subscriptions", []byte(`"SELECT k FROM kv"`))
	defer resp.Body.Close()
	id := resp.Header.Get("corro-query-id")
	n.subs.gc(time.Now().Add(24 * time.Hour))
	if n.subs.get(id) == nil {
		t.Fatal("a subscription with a listener was collected")
	}
}
