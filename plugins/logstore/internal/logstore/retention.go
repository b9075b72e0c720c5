package logstore

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ployz/ployz/plugins/internal/obsfs"
	"github.com/ployz/ployz/sdk/observe"
)

// Usage is what retention weighs against the budget.
type Usage struct {
	// Others is the bytes the rest of the Observe Store (metrics) uses.
	Others int64
	// Free is the free bytes of the store's filesystem; negative when
	// unknown (the floor is then not enforced).
	Free int64
}

// Eviction is one hour, or one chunk of the newest hour, retention
// deleted.
type Eviction struct {
	Hour string
	// Container is set when one chunk of its output was deleted, not the
	// whole hour.
	Container string
	Bytes     int64
	Reason    string
}

// Enforce deletes whole hours, oldest first, while the oldest hour is past
// the age cap. While the Observe Store is near its size cap or the disk is
// under its free floor it deletes chunks fairly: each time the oldest
// chunk of the Container holding the most bytes, so a flooding Container
// pays with its own history and another Container's lines stay while it
// holds less. The size cap acts from an eighth under the cap and deletes
// down to a quarter under it: Run calls Enforce again once a sixteenth
// was written, so a flood never takes the store past the cap (acting only
// from a sixteenth under it, a pass just short of that mark let the next
// sixteenth and a poll overshoot). now is the clock (tests pass a fake
// one).
func (s *Store) Enforce(now time.Time, b observe.Budget, u Usage) ([]Eviction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushLocked(); err != nil {
		return nil, fmt.Errorf("log store flush: %w", err)
	}
	e := &enforcer{s: s, now: now, b: b, free: u.Free}
	if err := e.measure(u.Others); err != nil {
		return nil, err
	}
	err := e.run()
	if perr := s.pruneLocked(); err == nil {
		err = perr
	}
	return e.out, err
}

// enforcer is one Enforce pass.
type enforcer struct {
	s     *Store
	now   time.Time
	b     observe.Budget
	hours []string
	chs   map[string][]chunk
	used  int64
	free  int64
	over  bool // near the size cap: delete down to a quarter under it
	out   []Eviction
}

func (e *enforcer) measure(others int64) error {
	hours, err := e.s.hours()
	if err != nil {
		return err
	}
	e.hours, e.chs = hours, map[string][]chunk{}
	e.used = others + obsfs.Size(filepath.Join(e.s.dir, "containers.json")) + obsfs.Size(filepath.Join(e.s.dir, "cursors.json"))
	for _, h := range hours {
		chs, err := e.s.chunks(h)
		if err != nil {
			return err
		}
		e.chs[h] = chs
		for _, c := range chs {
			e.used += c.size
		}
	}
	// Up to a sixteenth (and one poll) is written before the next pass:
	// act from an eighth under the cap, so that much never passes it.
	e.over = e.b.MaxBytes > 0 && e.used > e.b.MaxBytes-e.b.MaxBytes/8
	return nil
}

// reason is why more must go now, "" if nothing must.
func (e *enforcer) reason() string {
	switch {
	case e.over && e.used > e.b.MaxBytes-e.b.MaxBytes/4:
		return "size cap"
	case e.free >= 0 && e.b.MinFreeBytes > 0 && e.free < e.b.MinFreeBytes:
		return "disk free floor"
	}
	return ""
}

func (e *enforcer) freed(n int64) {
	e.used -= n
	if e.free >= 0 {
		e.free += n
	}
}

func (e *enforcer) run() error {
	for _, h := range e.hours {
		start, _ := time.ParseInLocation(hourLayout, h, time.UTC)
		if e.b.MaxAgeSeconds <= 0 || start.Add(time.Hour).After(e.now.Add(-e.b.MaxAge())) {
			break
		}
		if err := e.dropHour(h, start.Add(time.Hour), "age cap"); err != nil {
			return err
		}
		delete(e.chs, h)
	}
	return e.dropFair()
}

func (e *enforcer) dropHour(h string, end time.Time, reason string) error {
	s := e.s
	if err := os.RemoveAll(filepath.Join(s.dir, "hours", h)); err != nil {
		return fmt.Errorf("log store: delete hour %s: %w", h, err)
	}
	var size int64
	for _, c := range e.chs[h] {
		size += c.size
		if oc := s.open[c.id]; oc != nil && oc.hour == h {
			delete(s.open, c.id)
		}
	}
	e.freed(size)
	e.out = append(e.out, Eviction{Hour: h, Bytes: size, Reason: reason})
	if end.UnixNano() > s.retention.EvictedBefore {
		s.retention = retentionState{EvictedBefore: end.UnixNano(), Reason: reason}
		return obsfs.SaveJSON(filepath.Join(s.dir, "retention.json"), s.retention)
	}
	return nil
}

// dropFair deletes chunks while the budget does not hold: each time the
// oldest chunk of the Container that holds the most bytes (ties: the
// lower id). Each Container losing one gets a gap from its start.
func (e *enforcer) dropFair() error {
	held := map[string][]chunk{} // per Container, oldest first
	bytes := map[string]int64{}
	for _, h := range e.hours { // hours are sorted, chunks within one by time
		for _, c := range e.chs[h] {
			held[c.id] = append(held[c.id], c)
			bytes[c.id] += c.size
		}
	}
	for reason := e.reason(); reason != ""; reason = e.reason() {
		id := ""
		for cid, n := range bytes {
			if len(held[cid]) > 0 && (id == "" || n > bytes[id] || n == bytes[id] && cid < id) {
				id = cid
			}
		}
		if id == "" {
			return nil
		}
		c := held[id][0]
		held[id] = held[id][1:]
		bytes[id] -= c.size
		if err := e.dropChunk(c, reason); err != nil {
			return err
		}
	}
	return nil
}

func (e *enforcer) dropChunk(c chunk, reason string) error {
	s := e.s
	if err := os.Remove(c.path(s.dir)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("log store: delete chunk %s/%s: %w", c.hour, c.name, err)
	}
	_ = os.Remove(filepath.Join(s.dir, "hours", c.hour)) // only when that was its last chunk
	if oc := s.open[c.id]; oc != nil && oc.hour == c.hour && oc.first == c.first {
		delete(s.open, c.id)
	}
	e.freed(c.size)
	e.out = append(e.out, Eviction{Hour: c.hour, Container: c.id, Bytes: c.size, Reason: reason})
	if cc := s.containers[c.id]; cc != nil && c.lastWrite() > cc.EvictedBefore {
		cc.EvictedBefore, cc.EvictedReason = c.lastWrite(), reason
		s.catDirty = true
	}
	return nil
}

// pruneLocked forgets Containers none of whose lines are kept any more:
// older than the last hour deleted, or than the Container's own newest
// chunk deleted (its chunks go oldest first).
func (s *Store) pruneLocked() error {
	for id, c := range s.containers {
		if c.Last != 0 && (c.Last < s.retention.EvictedBefore || c.Last < c.EvictedBefore) {
			delete(s.containers, id)
			s.catDirty = true
		}
	}
	return s.flushLocked()
}

// Size is the bytes the log store uses on disk.
func (s *Store) Size() int64 { return obsfs.Size(s.dir) }
