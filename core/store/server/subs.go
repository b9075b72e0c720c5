package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/store/crdt"
)

// changeRetention is how many change events each subscription keeps for
// resuming; a client further behind gets an error and resubscribes.
const changeRetention = 10000

// Subscription limits: a client cannot grow the server without bound by
// subscribing to ever new queries, and a subscription nobody has listened
// to for subIdleTTL is dropped (a client resuming it later gets 404 and
// subscribes again).
const (
	maxSubscriptions = 1024
	subIdleTTL       = 10 * time.Minute // Corrosion's MAX_UNSUB_TIME
	subGCInterval    = time.Minute
)

// errTooManySubs refuses a new subscription over the cap.
type errTooManySubs struct{ max int }

func (e errTooManySubs) Error() string {
	return fmt.Sprintf("subscription limit reached: the server keeps at most %d distinct subscriptions; reuse an identical query or wait for idle ones to expire", e.max)
}

// errFromWithoutSub refuses ?from= on a query nobody subscribed to yet.
var errFromWithoutSub = errors.New("a `from` query param was supplied, but no existing subscription found")

// errorLine is Corrosion's error event.
func errorLine(err error) []byte {
	line := wireJSON(map[string]string{"error": err.Error()})
	return line
}

// eoqEvent is Corrosion's end-of-query event, fields in its order;
// queries carry no change id.
type eoqEvent struct {
	EOQ struct {
		Time     float64 `json:"time"`
		ChangeID *int64  `json:"change_id,omitempty"`
	} `json:"eoq"`
}

func eoqLine(elapsed time.Duration, changeID *int64) []byte {
	var e eoqEvent
	e.EOQ.Time, e.EOQ.ChangeID = elapsed.Seconds(), changeID
	line := wireJSON(e)
	return line
}

// listenerBuffer is how many events a slow reader may lag before it is cut off.
const listenerBuffer = 4096

const subsSchema = `
CREATE TABLE IF NOT EXISTS subs(id TEXT PRIMARY KEY, hash TEXT NOT NULL, query TEXT NOT NULL,
  args TEXT NOT NULL, last_change INTEGER NOT NULL, next_row INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sub_rows(sub TEXT NOT NULL, key TEXT NOT NULL, row_id INTEGER NOT NULL,
  vals TEXT NOT NULL, PRIMARY KEY(sub, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sub_changes(sub TEXT NOT NULL, change_id INTEGER NOT NULL, line TEXT NOT NULL,
  PRIMARY KEY(sub, change_id)) WITHOUT ROWID;
`

// subManager owns every subscription and its persisted state, kept in its
// own SQLite file so subscription ids and change ids survive restarts.
type subManager struct {
	db   *sql.DB
	eng  *crdt.Engine
	log  hclog.Logger
	stop chan struct{}
	wg   sync.WaitGroup

	maxSubs int
	idleTTL time.Duration

	mu     sync.Mutex
	byID   map[string]*sub
	byHash map[string]*sub
}

type srow struct {
	id   int64
	vals json.RawMessage
}

type listener struct {
	ch       chan []byte
	overflow bool
}

// sub is one shared subscription: a query, its materialised result and the
// change log derived from diffing successive results.
type sub struct {
	m      *subManager
	id     string
	hash   string
	query  string
	args   []any
	tables map[string]bool // tables the query reads; nil = unknown, recompute on any change
	runSQL string          // query as run: with the hidden identity columns when hidden > 0
	hidden int             // leading result columns that are row identity, not shown
	dirty  chan struct{}
	done   chan struct{} // closed when the subscription is dropped

	mu        sync.Mutex
	idleSince time.Time // when the last listener left; zero while listened to
	cols      []string
	identity  []int // result columns forming row identity; nil = the whole row
	rows      map[string]*srow
	order     []string
	last      int64
	nextRow   int64
	listeners map[*listener]bool
}

func openSubs(ctx context.Context, path string, eng *crdt.Engine, log hclog.Logger) (*subManager, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("open subscription state %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, subsSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create subscription state in %s: %w", path, err)
	}
	m := &subManager{db: db, eng: eng, log: log, stop: make(chan struct{}), byID: map[string]*sub{}, byHash: map[string]*sub{},
		maxSubs: maxSubscriptions, idleTTL: subIdleTTL}
	if err := m.load(ctx); err != nil {
		db.Close()
		return nil, err
	}
	m.wg.Add(1)
	go m.gcLoop(subGCInterval)
	return m, nil
}

// load restores persisted subscriptions and recomputes each once, so
// changes merged while the server was down become change events.
func (m *subManager) load(ctx context.Context) error {
	rows, err := m.db.QueryContext(ctx, `SELECT id, hash, query, args, last_change, next_row FROM subs`)
	if err != nil {
		return fmt.Errorf("load subscriptions: %w", err)
	}
	var list []*sub
	for rows.Next() {
		s := &sub{m: m, rows: map[string]*srow{}, listeners: map[*listener]bool{}, dirty: make(chan struct{}, 1),
			done: make(chan struct{}), idleSince: time.Now()}
		var args string
		if err := rows.Scan(&s.id, &s.hash, &s.query, &args, &s.last, &s.nextRow); err != nil {
			rows.Close()
			return fmt.Errorf("load subscriptions: %w", err)
		}
		var st Statement
		if err := json.Unmarshal([]byte(args), &st.Params); err != nil {
			rows.Close()
			return fmt.Errorf("subscription %s: decode params: %w", s.id, err)
		}
		s.args = st.Args()
		list = append(list, s)
	}
	rows.Close()
	for _, s := range list {
		r, err := m.db.QueryContext(ctx, `SELECT key, row_id, vals FROM sub_rows WHERE sub=?`, s.id)
		if err != nil {
			return fmt.Errorf("subscription %s: load rows: %w", s.id, err)
		}
		for r.Next() {
			var key, vals string
			var id int64
			if err := r.Scan(&key, &id, &vals); err != nil {
				r.Close()
				return fmt.Errorf("subscription %s: load rows: %w", s.id, err)
			}
			s.rows[key] = &srow{id: id, vals: json.RawMessage(vals)}
		}
		r.Close()
		s.tables = m.tablesOf(s.query)
		s.setIdentity()
		if err := s.recompute(ctx); err != nil {
			m.log.Warn("subscription query fails after restart", "id", s.id, "error", err)
		}
		m.byID[s.id], m.byHash[s.hash] = s, s
		m.wg.Add(1)
		go s.run()
	}
	return nil
}

// setIdentity picks how rows are identified: by the tables' primary keys
// when the query can carry them (identityQuery), else by the whole row.
func (s *sub) setIdentity() {
	s.runSQL, s.hidden = s.query, 0
	if q, n, ok := identityQuery(s.query, s.m.eng.Schema()); ok {
		s.runSQL, s.hidden = q, n
	}
}

func (m *subManager) tablesOf(query string) map[string]bool {
	out := map[string]bool{}
	for name := range m.eng.Schema().Tables {
		if regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(name) + `\b`).MatchString(query) {
			out[name] = true
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (m *subManager) notify(tables []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.byID {
		hit := s.tables == nil
		for _, t := range tables {
			hit = hit || s.tables[t]
		}
		if hit {
			select {
			case s.dirty <- struct{}{}:
			default: // a recompute is already queued; it will see this commit
			}
		}
	}
}

func (m *subManager) get(id string) *sub {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byID[id]
}

// subscribe returns the subscription for st, creating it when no identical
// (normalised SQL and parameters) subscription exists; with create unset
// an absent subscription is errFromWithoutSub.
func (m *subManager) subscribe(ctx context.Context, st Statement, create bool) (*sub, error) {
	params := st.paramsJSON()
	norm := strings.Join(strings.Fields(st.Query), " ")
	sum := sha256.Sum256([]byte(norm + "\x00" + string(params)))
	hash := hex.EncodeToString(sum[:16])
	tables := m.tablesOf(st.Query)
	m.mu.Lock()
	existing := m.byHash[hash]
	m.mu.Unlock()
	if existing != nil {
		return existing, nil
	}
	if !create {
		return nil, errFromWithoutSub
	}
	if len(st.Named) > 0 {
		return nil, fmt.Errorf("named parameters are not supported in subscriptions; use positional parameters")
	}
	m.mu.Lock()
	full := len(m.byID) >= m.maxSubs
	m.mu.Unlock()
	if full {
		return nil, errTooManySubs{m.maxSubs}
	}
	var idb [16]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	id = id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
	s := &sub{m: m, id: id, hash: hash, query: st.Query, args: st.Args(), rows: map[string]*srow{},
		listeners: map[*listener]bool{}, dirty: make(chan struct{}, 1), done: make(chan struct{}), tables: tables, idleSince: time.Now()}
	s.setIdentity()
	// The first query runs without m.mu: commit hooks take m.mu, and
	// holding it here would stall every write behind this query.
	if _, err := m.db.ExecContext(ctx, `INSERT INTO subs(id,hash,query,args,last_change,next_row) VALUES(?,?,?,?,0,1)`,
		id, hash, st.Query, string(params)); err != nil {
		return nil, fmt.Errorf("store subscription: %w", err)
	}
	s.nextRow = 1
	if err := s.refresh(ctx, true); err != nil {
		m.forget(ctx, id)
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if existing := m.byHash[hash]; existing != nil { // lost a race with an identical subscribe
		m.forget(ctx, id)
		return existing, nil
	}
	m.byID[id], m.byHash[hash] = s, s
	// Commits between the first query and registration were not seen:
	// recompute once so they arrive as change events after the snapshot.
	s.dirty <- struct{}{}
	m.wg.Add(1)
	go s.run()
	return s, nil
}

func (m *subManager) forget(ctx context.Context, id string) {
	for _, q := range []string{`DELETE FROM subs WHERE id=?`, `DELETE FROM sub_rows WHERE sub=?`, `DELETE FROM sub_changes WHERE sub=?`} {
		_, _ = m.db.ExecContext(ctx, q, id)
	}
}

// gcLoop drops subscriptions nobody has listened to for idleTTL.
func (m *subManager) gcLoop(every time.Duration) {
	defer m.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.gc(time.Now())
		}
	}
}

func (m *subManager) gc(now time.Time) {
	m.mu.Lock()
	var idle []*sub
	for id, s := range m.byID {
		s.mu.Lock()
		if len(s.listeners) == 0 && !s.idleSince.IsZero() && now.Sub(s.idleSince) >= m.idleTTL {
			idle = append(idle, s)
			delete(m.byID, id)
			delete(m.byHash, s.hash)
			close(s.done)
		}
		s.mu.Unlock()
	}
	m.mu.Unlock()
	for _, s := range idle {
		m.log.Info("dropping idle subscription", "id", s.id, "idle", now.Sub(s.idleSince))
		m.forget(context.Background(), s.id)
	}
}

func (m *subManager) close() {
	close(m.stop)
	m.wg.Wait()
	m.mu.Lock()
	for _, s := range m.byID {
		s.mu.Lock()
		for l := range s.listeners {
			close(l.ch)
			delete(s.listeners, l)
		}
		s.mu.Unlock()
	}
	m.mu.Unlock()
	m.db.Close()
}

func (s *sub) run() {
	defer s.m.wg.Done()
	for {
		select {
		case <-s.m.stop:
			return
		case <-s.done:
			return
		case <-s.dirty:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := s.recompute(ctx); err != nil {
				s.m.log.Warn("subscription recompute failed", "id", s.id, "error", err)
				s.fail(err)
			}
			cancel()
		}
	}
}

// fail sends a fatal error event to every listener and drops them.
func (s *sub) fail(err error) {
	line := errorLine(err)
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		select {
		case l.ch <- line:
		default:
		}
		close(l.ch)
		delete(s.listeners, l)
	}
}
