package store

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// dropLogEvery spaces a subscription's log lines about dropped events:
// the first drop is logged at once, later ones at most this often, with
// how many the line covers.
const dropLogEvery = time.Minute

// droppedByTable counts, in this process, the subscription events dropped
// as duplicate or out of order, by the table the subscription reads.
var droppedByTable = struct {
	sync.Mutex
	n map[string]int64
}{n: map[string]int64{}}

// DroppedEvents is how many subscription events this process dropped as
// duplicate or out of order since it started, by table (nil when none).
// A tolerant reader drops them to stay correct; a count above zero means
// a store server repeated or reordered changes, which it must not.
func DroppedEvents() map[string]int64 {
	droppedByTable.Lock()
	defer droppedByTable.Unlock()
	if len(droppedByTable.n) == 0 {
		return nil
	}
	return maps.Clone(droppedByTable.n)
}

func countDropped(table string) {
	droppedByTable.Lock()
	droppedByTable.n[table]++
	droppedByTable.Unlock()
}

// fromTable finds the first table a query reads, to name its drops.
var fromTable = regexp.MustCompile(`(?is)\bfrom\s+["\x60\[]?([A-Za-z_][A-Za-z0-9_]*)`)

func queryTable(q string) string {
	if m := fromTable.FindStringSubmatch(q); m != nil {
		return strings.ToLower(m[1])
	}
	return "unknown"
}

// dropCounter is one subscription's count of dropped events and the
// rate limit of its log lines.
type dropCounter struct {
	mu       sync.Mutex
	total    int64     // dropped by this subscription
	unlogged int64     // dropped since the last log line
	logged   time.Time // when the last line was written
}

// add counts a drop at now; log says whether to write a line now, n how
// many drops it covers.
func (d *dropCounter) add(now time.Time) (log bool, n, total int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total++
	d.unlogged++
	if !d.logged.IsZero() && now.Sub(d.logged) < dropLogEvery {
		return false, 0, d.total
	}
	n, d.unlogged, d.logged = d.unlogged, 0, now
	return true, n, d.total
}

// flush takes the drops no line has covered yet (at the subscription's end).
func (d *dropCounter) flush() (n, total int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, d.unlogged = d.unlogged, 0
	return n, d.total
}

// Dropped is how many events this subscription dropped as duplicate or
// out of order.
func (s *Subscription) Dropped() int64 {
	s.drops.mu.Lock()
	defer s.drops.mu.Unlock()
	return s.drops.total
}

// dropped counts a change the server repeated or sent out of order (its id
// is not after the last delivered), and logs it within the rate limit.
func (s *Subscription) dropped(changeID, last int64) {
	countDropped(s.table)
	if log, n, total := s.drops.add(time.Now()); log {
		s.logger().Warn("store subscription dropped duplicate or out-of-order changes", "subscription", s.ID, "table", s.table,
			"change_id", changeID, "last_delivered", last, "dropped", n, "dropped_total", total)
	}
}

// logUnreported writes the drops the rate limit held back, when the
// subscription ends.
func (s *Subscription) logUnreported() {
	if n, total := s.drops.flush(); n > 0 {
		s.logger().Warn("store subscription dropped duplicate or out-of-order changes", "subscription", s.ID, "table", s.table,
			"dropped", n, "dropped_total", total)
	}
}

// logger is the subscription's log, hclog's default for one built
// without Subscribe.
func (s *Subscription) logger() hclog.Logger {
	if s.log == nil {
		return hclog.Default().Named("store")
	}
	return s.log
}

// StrictForTests makes every subscription of this process Strict (see
// SubscribeOptions.Strict), for the tests of a package that reads the
// store: a repeated change ends the subscription instead of being skipped.
// Call it from an init function or TestMain, before any subscription.
func StrictForTests() { strictEvents = true }

// RunStrict runs a package's tests (m is its *testing.M) with every
// subscription Strict and fails the run when any event was dropped as
// duplicate or out of order: a reader that resubscribes after a Strict
// error (Watch) would otherwise hide it. For TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(store.RunStrict(m)) }
func RunStrict(m interface{ Run() int }) int {
	StrictForTests()
	code := m.Run()
	if d := DroppedEvents(); len(d) > 0 {
		tables := make([]string, 0, len(d))
		for t, n := range d {
			tables = append(tables, fmt.Sprintf("%s: %d", t, n))
		}
		sort.Strings(tables)
		fmt.Fprintf(os.Stderr, "store.RunStrict: the tests' store subscriptions dropped duplicate or out-of-order changes (%s)\n", strings.Join(tables, ", "))
		if code == 0 {
			code = 1
		}
	}
	return code
}
