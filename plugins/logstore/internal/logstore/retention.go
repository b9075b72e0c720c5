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

// Eviction is one hour retention deleted.
type Eviction struct {
	Hour   string
	Bytes  int64
	Reason string
}

// Enforce deletes whole hours, oldest first, while the oldest hour is past
// the age cap, the Observe Store is over its size cap, or the disk is
// under its free floor. now is the clock (tests pass a fake one).
func (s *Store) Enforce(now time.Time, b observe.Budget, u Usage) ([]Eviction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushLocked(); err != nil {
		return nil, fmt.Errorf("log store flush: %w", err)
	}
	hours, err := s.hours()
	if err != nil {
		return nil, err
	}
	sizes := make([]int64, len(hours))
	used := u.Others + obsfs.Size(filepath.Join(s.dir, "containers.json")) + obsfs.Size(filepath.Join(s.dir, "cursors.json"))
	for i, h := range hours {
		sizes[i] = obsfs.Size(filepath.Join(s.dir, "hours", h))
		used += sizes[i]
	}
	free := u.Free
	var out []Eviction
	for i, h := range hours {
		start, _ := time.ParseInLocation(hourLayout, h, time.UTC)
		end := start.Add(time.Hour)
		var reason string
		switch {
		case b.MaxAgeSeconds > 0 && !end.After(now.Add(-b.MaxAge())):
			reason = "age cap"
		case b.MaxBytes > 0 && used > b.MaxBytes:
			reason = "size cap"
		case free >= 0 && b.MinFreeBytes > 0 && free < b.MinFreeBytes:
			reason = "disk free floor"
		default:
			return out, s.pruneLocked()
		}
		if err := os.RemoveAll(filepath.Join(s.dir, "hours", h)); err != nil {
			return out, fmt.Errorf("log store: delete hour %s: %w", h, err)
		}
		used -= sizes[i]
		if free >= 0 {
			free += sizes[i]
		}
		out = append(out, Eviction{Hour: h, Bytes: sizes[i], Reason: reason})
		if end.UnixNano() > s.retention.EvictedBefore {
			s.retention = retentionState{EvictedBefore: end.UnixNano(), Reason: reason}
			if err := obsfs.SaveJSON(filepath.Join(s.dir, "retention.json"), s.retention); err != nil {
				return out, err
			}
		}
	}
	return out, s.pruneLocked()
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
