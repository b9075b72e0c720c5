package logstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ployz/ployz/plugins/internal/obsfs"
	"github.com/ployz/ployz/plugins/logstore/internal/dockerlog"
)

// FormatVersion is the on-disk format this binary writes. A store holding
// another version is deleted and started again: the Observe Store is a
// cache of recent history, outside the stable-format promise.
const FormatVersion = "ployz-logstore 1"

const hourLayout = "2006010215"

// Store is the on-disk log store of one Machine.
type Store struct {
	dir string

	mu         sync.Mutex
	containers map[string]*Container
	catDirty   bool
	pending    map[segKey][]byte
	open       map[string]*openChunk // by Container id
	chunkBytes int
	retention  retentionState
	subs       map[*Sub]struct{}

	// written counts bytes flushed to chunks (retention runs when a flood
	// wrote enough); chunksRead counts chunk files queries read (tests).
	written    atomic.Int64
	chunksRead atomic.Int64
}

type segKey struct {
	hour, id string
	first    int64
}

// retentionState is retention.json: lines before EvictedBefore were
// deleted, the last time for Reason.
type retentionState struct {
	EvictedBefore int64  `json:"evicted_before_unix_nano,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// Open opens (or creates) the store in dir. A store written in another
// format version is deleted first.
func Open(dir string) (*Store, error) {
	if err := obsfs.OpenVersioned(dir, FormatVersion); err != nil {
		return nil, fmt.Errorf("log store: %w", err)
	}
	s := &Store{dir: dir, containers: map[string]*Container{}, pending: map[segKey][]byte{}, open: map[string]*openChunk{},
		chunkBytes: defaultChunkBytes, subs: map[*Sub]struct{}{}}
	var list []*Container
	if err := obsfs.LoadJSON(filepath.Join(dir, "containers.json"), &list); err != nil {
		return nil, fmt.Errorf("log store: containers.json: %w", err)
	}
	for _, c := range list {
		s.containers[c.ID] = c
	}
	if err := obsfs.LoadJSON(filepath.Join(dir, "retention.json"), &s.retention); err != nil {
		return nil, fmt.Errorf("log store: retention.json: %w", err)
	}
	return s, nil
}

// SetChunkBytes sets the size at which a Container's chunk is closed and
// a new one started (ChunkBytesFor a budget).
func (s *Store) SetChunkBytes(n int) {
	s.mu.Lock()
	s.chunkBytes = max(n, 1)
	s.mu.Unlock()
}

// Written is the count of bytes flushed to chunks since Open.
func (s *Store) Written() int64 { return s.written.Load() }

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Append stores lines of the Container c (its metadata refreshes what the
// catalog holds) and hands them to followers. Lines are buffered until
// Flush.
func (s *Store) Append(c Container, lines []dockerlog.Line) {
	if len(lines) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.containers[c.ID]
	if cur == nil {
		cur = &Container{ID: c.ID, First: lines[0].TimeNano}
		s.containers[c.ID] = cur
	}
	cur.Name, cur.Namespace, cur.Service, cur.Deployment = c.Name, c.Namespace, c.Service, c.Deployment
	s.catDirty = true
	for _, l := range lines {
		r := Record{TimeNano: l.TimeNano, Stream: streamByte(l.Source), Line: l.Text}
		k := s.chunkFor(c.ID, l.TimeNano, bodyHeader+recHeader+len(r.Line))
		s.pending[k] = appendRecord(s.pending[k], r)
		if cur.First == 0 || l.TimeNano < cur.First {
			cur.First = l.TimeNano
		}
		if l.TimeNano > cur.Last {
			cur.Last = l.TimeNano
		}
		if len(s.subs) > 0 {
			s.publish(Hit{Record: r, Container: *cur})
		}
	}
}

// chunkFor is the chunk a line of Container id at time t of n bytes goes
// to: the open one, or a new one when the hour changed or it is full.
func (s *Store) chunkFor(id string, t int64, n int) segKey {
	h := hourOf(t)
	oc := s.open[id]
	if oc == nil || oc.hour != h || oc.size >= s.chunkBytes {
		oc = &openChunk{hour: h, first: t}
		s.open[id] = oc
	}
	oc.size += n
	return segKey{hour: h, id: id, first: oc.first}
}

// MarkRemoved records that Docker no longer has the Container.
func (s *Store) MarkRemoved(id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.containers[id]; c != nil && c.Removed == 0 {
		c.Removed = at.UnixNano()
		s.catDirty = true
	}
	delete(s.open, id) // no more lines come

}

func hourOf(t int64) string { return time.Unix(0, t).UTC().Format(hourLayout) }

// Flush writes buffered lines to their segments and the catalog to disk.
func (s *Store) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

func (s *Store) flushLocked() error {
	var errs []error
	for k, b := range s.pending {
		if err := obsfs.AppendFile(filepath.Join(s.dir, "hours", k.hour, chunkName(k.id, k.first)), b); err != nil {
			errs = append(errs, err)
			continue
		}
		s.written.Add(int64(len(b)))
		delete(s.pending, k)
	}
	if s.catDirty {
		list := make([]*Container, 0, len(s.containers))
		for _, c := range s.containers {
			list = append(list, c)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
		if err := obsfs.SaveJSON(filepath.Join(s.dir, "containers.json"), list); err != nil {
			errs = append(errs, err)
		} else {
			s.catDirty = false
		}
	}
	return errors.Join(errs...)
}

// Containers returns a copy of the catalog.
func (s *Store) Containers() []Container {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Container, 0, len(s.containers))
	for _, c := range s.containers {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Hit is one line found, with the Container that logged it.
type Hit struct {
	Record
	Container Container
}

// Query selects lines in [From, To] (unix nanoseconds; To 0 is no end).
type Query struct {
	Sel      Selector
	From, To int64
	// Limit caps the lines returned (0: none); Newest keeps the last
	// Limit lines of the range instead of the first.
	Limit  int
	Newest bool
	Grep   *regexp.Regexp
}

// Gap is a part of a query's range the store cannot answer.
type Gap struct {
	From, To int64
	Reason   string
}

// Result is a query's answer, lines ordered by time.
type Result struct {
	Hits      []Hit
	Truncated bool
	Gaps      []Gap
}

// Query reads the lines q selects, hour by hour, stopping once Limit is
// reached at an hour's end.
func (s *Store) Query(q Query) (Result, error) {
	s.mu.Lock()
	if err := s.flushLocked(); err != nil {
		s.mu.Unlock()
		return Result{}, fmt.Errorf("log store flush: %w", err)
	}
	cat := make(map[string]Container, len(s.containers))
	for id, c := range s.containers {
		if q.Sel.match(c) {
			cat[id] = *c
		}
	}
	ret := s.retention
	s.mu.Unlock()

	var res Result
	if g, ok := retentionGap(ret, cat, q); ok {
		res.Gaps = append(res.Gaps, g)
	}
	hours, err := s.hours()
	if err != nil {
		return res, err
	}
	if q.Newest {
		sort.Sort(sort.Reverse(sort.StringSlice(hours)))
	}
	for i, h := range hours {
		start, _ := time.ParseInLocation(hourLayout, h, time.UTC)
		if (q.To != 0 && start.UnixNano() > q.To) || start.Add(time.Hour).UnixNano() <= q.From {
			continue
		}
		need := 0
		if q.Newest && q.Limit > 0 {
			need = q.Limit - len(res.Hits)
		}
		hits, err := s.readHour(h, cat, q, need)
		if err != nil {
			return res, err
		}
		if q.Newest {
			res.Hits = append(hits, res.Hits...)
		} else {
			res.Hits = append(res.Hits, hits...)
		}
		if q.Limit > 0 && len(res.Hits) >= q.Limit {
			res.Truncated = len(res.Hits) > q.Limit || i < len(hours)-1
			break
		}
	}
	if q.Limit > 0 && len(res.Hits) > q.Limit {
		if q.Newest {
			res.Hits = res.Hits[len(res.Hits)-q.Limit:]
		} else {
			res.Hits = res.Hits[:q.Limit]
		}
	}
	return res, nil
}

// retentionGap is the part of q's range retention deleted: before the
// last whole hour it deleted, or before the last chunk it deleted of a
// Container q selects.
func retentionGap(ret retentionState, cat map[string]Container, q Query) (Gap, bool) {
	before, reason := ret.EvictedBefore, ret.Reason
	for _, c := range cat {
		if c.EvictedBefore > before {
			before, reason = c.EvictedBefore, c.EvictedReason
		}
	}
	if before == 0 || q.From >= before {
		return Gap{}, false
	}
	if q.To != 0 && q.To < before {
		before = q.To
	}
	return Gap{From: q.From, To: before, Reason: "deleted by retention (" + reason + ")"}, true
}

// readHour reads the chunks of hour h whose Container is in cat. With
// need > 0 it wants the newest need lines: it reads chunks newest first and
// stops once need lines are newer than anything an unread chunk can hold.
func (s *Store) readHour(h string, cat map[string]Container, q Query, need int) ([]Hit, error) {
	all, err := s.chunks(h)
	if err != nil {
		return nil, err
	}
	var chs []chunk
	for _, c := range all {
		if _, known := cat[c.id]; known && (q.To == 0 || c.first <= q.To) && c.upper() >= q.From {
			chs = append(chs, c)
		}
	}
	if need > 0 {
		sort.Slice(chs, func(i, j int) bool { return chs[i].upper() > chs[j].upper() })
	}
	var hits []Hit
	for _, c := range chs {
		if need > 0 && newerThan(hits, c.upper()) >= need {
			break
		}
		s.chunksRead.Add(1)
		err := readSegment(c.path(s.dir), func(r Record) bool {
			if r.TimeNano < q.From || (q.To != 0 && r.TimeNano > q.To) {
				return true
			}
			if q.Grep != nil && !q.Grep.Match(r.Line) {
				return true
			}
			r.Line = append([]byte(nil), r.Line...)
			hits = append(hits, Hit{Record: r, Container: cat[c.id]})
			return true
		})
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].TimeNano < hits[j].TimeNano })
	return hits, nil
}

// newerThan counts the hits after t.
func newerThan(hits []Hit, t int64) int {
	n := 0
	for _, h := range hits {
		if h.TimeNano > t {
			n++
		}
	}
	return n
}

// hours lists the stored hours, oldest first.
func (s *Store) hours() ([]string, error) {
	es, err := os.ReadDir(filepath.Join(s.dir, "hours"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range es {
		if _, err := time.ParseInLocation(hourLayout, e.Name(), time.UTC); err == nil && e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
