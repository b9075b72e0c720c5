package logstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
// the age cap, the Observe Store is near its size cap, or the disk is
// under its free floor. Within the newest hour (a flood fills one) it
// deletes chunks, least recently written first. The size cap acts from an
// eighth under the cap and deletes down to a quarter under it: Run calls
// Enforce again once a sixteenth was written, so a flood never takes the
// store past the cap (acting only from a sixteenth under it, a pass just
// short of that mark let the next sixteenth and a poll overshoot). now is the clock (tests pass a fake one).
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

// reason is why data of an hour ending at end must go now, "" if none.
func (e *enforcer) reason(end time.Time) string {
	switch {
	case e.b.MaxAgeSeconds > 0 && !end.After(e.now.Add(-e.b.MaxAge())):
		return "age cap"
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
	for i, h := range e.hours {
		start, _ := time.ParseInLocation(hourLayout, h, time.UTC)
		end := start.Add(time.Hour)
		reason := e.reason(end)
		switch {
		case reason == "":
			return nil
		case reason == "age cap" || i < len(e.hours)-1:
			if err := e.dropHour(h, end, reason); err != nil {
				return err
			}
		default:
			return e.dropChunks(h, end)
		}
	}
	return nil
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

// dropChunks deletes chunks of the newest hour h, least recently written
// first, until the budget holds; each Container losing one gets a gap.
func (e *enforcer) dropChunks(h string, end time.Time) error {
	s := e.s
	chs := e.chs[h]
	sort.SliceStable(chs, func(i, j int) bool { return chs[i].lastWrite() < chs[j].lastWrite() })
	for _, c := range chs {
		reason := e.reason(end)
		if reason == "" {
			return nil
		}
		if err := os.Remove(c.path(s.dir)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("log store: delete chunk %s/%s: %w", h, c.name, err)
		}
		if oc := s.open[c.id]; oc != nil && oc.hour == h && oc.first == c.first {
			delete(s.open, c.id)
		}
		e.freed(c.size)
		e.out = append(e.out, Eviction{Hour: h, Container: c.id, Bytes: c.size, Reason: reason})
		if cc := s.containers[c.id]; cc != nil && c.lastWrite() > cc.EvictedBefore {
			cc.EvictedBefore, cc.EvictedReason = c.lastWrite(), reason
			s.catDirty = true
		}
	}
	return nil
}

// pruneLocked forgets Containers none of whose lines are kept any more.
func (s *Store) pruneLocked() error {
	for id, c := range s.containers {
		if c.Last != 0 && c.Last < s.retention.EvictedBefore {
			delete(s.containers, id)
			s.catDirty = true
		}
	}
	return s.flushLocked()
}

// Size is the bytes the log store uses on disk.
func (s *Store) Size() int64 { return obsfs.Size(s.dir) }
