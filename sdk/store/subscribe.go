package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// ErrSubscriptionGone is wrapped by Subscription.Err when the server no
// longer has the subscription (dropped after 10 minutes without a
// listener, as Corrosion does): subscribe again and rebuild from its
// snapshot.
var ErrSubscriptionGone = errors.New("subscription gone from the server")

// rawEvent is one NDJSON line of a query or subscription stream.
type rawEvent struct {
	Columns []string          `json:"columns"`
	Row     []json.RawMessage `json:"row"`
	EOQ     *struct {
		Time     float64 `json:"time"`
		ChangeID *int64  `json:"change_id"`
	} `json:"eoq"`
	Change []json.RawMessage `json:"change"`
	Error  *string           `json:"error"`
}

func decodeRow(raw []json.RawMessage) (int64, []any, error) {
	if len(raw) != 2 {
		return 0, nil, fmt.Errorf("row event has %d elements, want 2", len(raw))
	}
	var id int64
	if err := json.Unmarshal(raw[0], &id); err != nil {
		return 0, nil, fmt.Errorf("row id: %w", err)
	}
	vals, err := decodeValues(raw[1])
	return id, vals, err
}

func decodeValues(raw json.RawMessage) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var vals []any
	if err := dec.Decode(&vals); err != nil {
		return nil, fmt.Errorf("row values: %w", err)
	}
	for i, v := range vals {
		if n, ok := v.(json.Number); ok {
			if iv, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				vals[i] = iv
			} else if fv, err := n.Float64(); err == nil {
				vals[i] = fv
			}
		}
	}
	return vals, nil
}

// EventKind names a subscription event.
type EventKind string

// Subscription event kinds.
const (
	EventRow    EventKind = "row"    // one row of the initial result
	EventEOQ    EventKind = "eoq"    // end of the initial result
	EventChange EventKind = "change" // a later change to the result set
)

// Event is one subscription event.
type Event struct {
	Kind       EventKind
	ChangeKind string // insert, update or delete (EventChange only)
	RowID      int64  // the row's id within the subscription
	Values     []any
	ChangeID   int64 // EventChange: this change; EventEOQ: last change in the snapshot
}

// SubscribeOptions tunes a subscription.
type SubscribeOptions struct {
	// SkipRows delivers no initial rows: eoq (with its change id), then
	// changes. The client still reads the snapshot and drops the rows
	// itself rather than asking for Corrosion's skip_rows, which sends no
	// columns and no eoq and cannot resume exactly before a first change.
	SkipRows bool
	// MaxRetry bounds how long reconnect attempts may keep failing before
	// the subscription ends with an error; default 60 s.
	MaxRetry time.Duration
	// Strict ends the subscription with an error when the server repeats
	// a change id already delivered or sends an event kind this client
	// does not know, instead of skipping it. Readers are tolerant in
	// production; tests are strict so "no duplicate" can fail.
	Strict bool
	// Log receives a rate-limited warning for the duplicate or
	// out-of-order changes a tolerant subscription drops; default
	// hclog.Default().
	Log hclog.Logger
}

// strictEvents makes every subscription Strict; this package's tests set
// it, other packages' tests through StrictForTests or RunStrict.
var strictEvents = false

// Subscription is a live subscription that reconnects on its own and
// resumes after the last change id it delivered, so no change is missed or
// repeated across disconnects and server restarts.
type Subscription struct {
	ID      string
	Hash    string
	Columns []string
	Events  <-chan Event

	c      *Client
	opts   SubscribeOptions
	events chan Event
	cancel context.CancelFunc
	mu     sync.Mutex
	err    error
	last   int64
	done   chan struct{}

	table string       // the first table the query reads, naming its drops
	log   hclog.Logger // for dropped changes
	drops dropCounter

	// snap holds the snapshot rows (row id -> values) while no change has
	// arrived: a resume at change 0 gets a fresh snapshot (Corrosion treats
	// ?from=0 as "from the start"), which is turned into the changes that
	// lead from this one to it.
	snap map[int64][]any
}

// Subscribe starts a subscription on st.
func (c *Client) Subscribe(ctx context.Context, st Statement, opts SubscribeOptions) (*Subscription, error) {
	if opts.MaxRetry == 0 {
		opts.MaxRetry = time.Minute
	}
	opts.Strict = opts.Strict || strictEvents
	if opts.Log == nil {
		opts.Log = hclog.Default().Named("store")
	}
	path := "/v1/subscriptions"
	// The stream lives until Close, so it gets its own cancelable context.
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.do(ctx, "POST", path, st)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Subscription{ID: resp.Header.Get("corro-query-id"), Hash: resp.Header.Get("corro-query-hash"),
		c: c, opts: opts, events: make(chan Event, 256), cancel: cancel, done: make(chan struct{}),
		table: queryTable(st.Query), log: opts.Log}
	s.Events = s.events
	if s.ID == "" {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("subscription answer has no corro-query-id header")
	}
	dec := json.NewDecoder(resp.Body)
	var first rawEvent
	if err := dec.Decode(&first); err != nil || first.Columns == nil {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("subscription %s: first event is not columns: %v", s.ID, err)
	}
	s.Columns = first.Columns
	s.snap = map[int64][]any{}
	go s.run(ctx, resp, dec)
	return s, nil
}

// Err is why the subscription ended (nil while it runs or after Close).
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastChangeID is the last change id delivered.
func (s *Subscription) LastChangeID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Close stops the subscription; Events is closed afterwards.
func (s *Subscription) Close() {
	s.cancel()
	<-s.done
}

func (s *Subscription) run(ctx context.Context, resp *http.Response, dec *json.Decoder) {
	defer close(s.done)
	defer close(s.events)
	defer s.logUnreported()
	var failingSince time.Time
	backoff := 50 * time.Millisecond
	for resumed := false; ; resumed = true {
		err := s.read(ctx, dec, resumed)
		resp.Body.Close()
		if ctx.Err() != nil {
			return
		}
		var fatal *fatalError
		if errors.As(err, &fatal) {
			s.setErr(err)
			return
		}
		// Reconnect and resume after the last delivered change.
		for {
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			path := "/v1/subscriptions/" + s.ID + "?from=" + strconv.FormatInt(s.LastChangeID(), 10)
			resp, err = s.c.do(ctx, "GET", path, nil)
			if err == nil {
				dec = json.NewDecoder(resp.Body)
				failingSince, backoff = time.Time{}, 50*time.Millisecond
				break
			}
			var apiErr *APIError
			if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
				s.setErr(fmt.Errorf("resume subscription %s: %w: %w", s.ID, ErrSubscriptionGone, err))
				return
			}
			if errors.As(err, &apiErr) && apiErr.Status/100 == 4 {
				s.setErr(fmt.Errorf("resume subscription %s: %w", s.ID, err))
				return
			}
			if time.Since(failingSince) > s.opts.MaxRetry {
				s.setErr(fmt.Errorf("resume subscription %s: gave up after %v: %w", s.ID, s.opts.MaxRetry, err))
				return
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}
}

type fatalError struct{ msg string }

// Error returns the server-sent reason.
func (e *fatalError) Error() string { return e.msg }

func (s *Subscription) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// read delivers events until the stream ends; a transport error returns a
// plain error (reconnect), an error event returns *fatalError. After a
// resume, a snapshot (the server's answer to ?from=0) is folded into
// change events against the snapshot already delivered.
func (s *Subscription) read(ctx context.Context, dec *json.Decoder, resumed bool) error {
	var again map[int64][]any // rows of a snapshot re-sent on resume
	for {
		var ev rawEvent
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("subscription %s stream: %w", s.ID, err)
		}
		var out []Event
		switch {
		case ev.Error != nil:
			return &fatalError{msg: "subscription " + s.ID + ": " + *ev.Error}
		case ev.Columns != nil:
			if resumed {
				again = map[int64][]any{}
			}
			continue
		case ev.Row != nil:
			id, vals, err := decodeRow(ev.Row)
			if err != nil {
				return &fatalError{msg: err.Error()}
			}
			if again != nil {
				again[id] = vals
				continue
			}
			if s.snap != nil {
				s.snap[id] = vals
			}
			if s.opts.SkipRows {
				continue
			}
			out = []Event{{Kind: EventRow, RowID: id, Values: vals}}
		case ev.EOQ != nil:
			var changeID int64
			if ev.EOQ.ChangeID != nil {
				changeID = *ev.EOQ.ChangeID
			}
			if again != nil {
				out = s.snapshotChanges(again, changeID)
				again = nil
			} else {
				out = []Event{{Kind: EventEOQ, ChangeID: changeID}}
			}
			s.mu.Lock()
			s.last = changeID
			if changeID > 0 {
				s.snap = nil
			}
			s.mu.Unlock()
		case ev.Change != nil:
			ch, err := decodeChange(ev.Change)
			if err != nil {
				return &fatalError{msg: err.Error()}
			}
			s.mu.Lock()
			if ch.ChangeID <= s.last { // already delivered before a reconnect
				last := s.last
				s.mu.Unlock()
				s.dropped(ch.ChangeID, last)
				if s.opts.Strict {
					return &fatalError{msg: fmt.Sprintf("subscription %s: change %d repeated (last delivered %d)", s.ID, ch.ChangeID, last)}
				}
				continue
			}
			s.last = ch.ChangeID
			s.snap = nil
			s.mu.Unlock()
			out = []Event{ch}
		default:
			if s.opts.Strict {
				return &fatalError{msg: "subscription " + s.ID + ": unknown event"}
			}
			continue // a newer server's event kind
		}
		for _, e := range out {
			select {
			case s.events <- e:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// snapshotChanges turns a snapshot re-sent on resume into the changes from
// the delivered snapshot to it, all carrying the snapshot's change id.
func (s *Subscription) snapshotChanges(now map[int64][]any, changeID int64) []Event {
	var out []Event
	for _, id := range sortedIDs(s.snap) {
		if _, ok := now[id]; !ok {
			out = append(out, Event{Kind: EventChange, ChangeKind: "delete", RowID: id, Values: s.snap[id], ChangeID: changeID})
		}
	}
	for _, id := range sortedIDs(now) {
		old, ok := s.snap[id]
		switch {
		case !ok:
			out = append(out, Event{Kind: EventChange, ChangeKind: "insert", RowID: id, Values: now[id], ChangeID: changeID})
		case !reflect.DeepEqual(old, now[id]):
			out = append(out, Event{Kind: EventChange, ChangeKind: "update", RowID: id, Values: now[id], ChangeID: changeID})
		}
	}
	s.snap = now
	return out
}

func sortedIDs(m map[int64][]any) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func decodeChange(raw []json.RawMessage) (Event, error) {
	if len(raw) != 4 {
		return Event{}, fmt.Errorf("change event has %d elements, want 4", len(raw))
	}
	ev := Event{Kind: EventChange}
	if err := json.Unmarshal(raw[0], &ev.ChangeKind); err != nil {
		return ev, fmt.Errorf("change kind: %w", err)
	}
	if err := json.Unmarshal(raw[1], &ev.RowID); err != nil {
		return ev, fmt.Errorf("change row id: %w", err)
	}
	vals, err := decodeValues(raw[2])
	if err != nil {
		return ev, err
	}
	ev.Values = vals
	if err := json.Unmarshal(raw[3], &ev.ChangeID); err != nil {
		return ev, fmt.Errorf("change id: %w", err)
	}
	return ev, nil
}
