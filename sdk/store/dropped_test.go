package store

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestTolerantSubscriptionCountsDrops: a server that repeats a change and
// sends an older one gets them dropped by a tolerant subscription, which
// counts them (on the subscription and by table for the process) and
// logs the first at once, the one the rate limit held back at its end.
func TestTolerantSubscriptionCountsDrops(t *testing.T) {
	defer func(was bool) { strictEvents = was }(strictEvents)
	strictEvents = false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("corro-query-id", "q1")
		fmt.Fprintln(w, `{"columns":["id"]}`)
		for _, id := range []int{1, 2, 2, 1, 3} {
			fmt.Fprintf(w, `{"change":["insert",%d,["a"],%d]}`+"\n", id, id)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	before := DroppedEvents()["dropcount"]
	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	sub, err := New(strings.TrimPrefix(srv.URL, "http://")).Subscribe(context.Background(),
		Stmt("SELECT id FROM dropcount WHERE id > 0"), SubscribeOptions{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{1, 2, 3} {
		if ev := next(t, sub); ev.ChangeID != want {
			t.Fatalf("delivered %+v, want change %d", ev, want)
		}
	}
	sub.Close()
	if sub.Dropped() != 2 || DroppedEvents()["dropcount"]-before != 2 {
		t.Fatalf("dropped %d, process count for dropcount %v (was %d); want 2 more", sub.Dropped(), DroppedEvents(), before)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "table=dropcount") || !strings.Contains(lines[0], "change_id=2 last_delivered=2 dropped=1 dropped_total=1") ||
		!strings.Contains(lines[1], "dropped=1 dropped_total=2") {
		t.Fatalf("log lines:\n%s", logs.String())
	}
}

// TestDropLogIsRateLimited: the first drop is logged, then at most one
// line a minute, covering the drops since the last.
func TestDropLogIsRateLimited(t *testing.T) {
	var d dropCounter
	t0 := time.Now()
	type step struct {
		at       time.Duration
		log      bool
		n, total int64
	}
	for i, s := range []step{{0, true, 1, 1}, {time.Second, false, 0, 2}, {30 * time.Second, false, 0, 3},
		{dropLogEvery, true, 3, 4}, {dropLogEvery + time.Second, false, 0, 5}} {
		log, n, total := d.add(t0.Add(s.at))
		if log != s.log || n != s.n || total != s.total {
			t.Errorf("drop %d at +%v: log %t n %d total %d; want %+v", i, s.at, log, n, total, s)
		}
	}
	if n, total := d.flush(); n != 1 || total != 5 {
		t.Errorf("flush: %d of %d; want 1 of 5", n, total)
	}
}

func TestQueryTable(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT id FROM containers WHERE x": "containers",
		"select a\nfrom  \"Machines\" m":    "machines",
		"SELECT 1":                          "unknown",
	} {
		if got := queryTable(q); got != want {
			t.Errorf("queryTable(%q) = %q, want %q", q, got, want)
		}
	}
}

type runFunc func() int

func (f runFunc) Run() int { return f() }

// TestRunStrictFailsOnADrop: a package's tests that pass but dropped a
// repeated change fail as a run; without a drop the run's code stands.
func TestRunStrictFailsOnADrop(t *testing.T) {
	defer func(was bool) { strictEvents = was }(strictEvents)
	// This package's other tests drop events on purpose: start from none.
	droppedByTable.Lock()
	kept := droppedByTable.n
	droppedByTable.n = map[string]int64{}
	droppedByTable.Unlock()
	defer func() { droppedByTable.Lock(); droppedByTable.n = kept; droppedByTable.Unlock() }()
	if code := RunStrict(runFunc(func() int { return 0 })); code != 0 || !strictEvents {
		t.Fatalf("RunStrict = %d, strict %t; want 0, strict", code, strictEvents)
	}
	if code := RunStrict(runFunc(func() int { return 3 })); code != 3 {
		t.Fatalf("RunStrict = %d; want the run's 3", code)
	}
	if code := RunStrict(runFunc(func() int { countDropped("runstrict"); return 0 })); code != 1 {
		t.Fatalf("RunStrict after a drop = %d, want 1", code)
	}
}
