package metrics

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/ployz/ployz/plugins/internal/obsfs"
)

// FormatVersion is the on-disk format; a store in another one is deleted
// and started again (the Observe Store has no migrations).
const FormatVersion = "ployz-metrics 1"

// Retention and resolution.
const (
	Interval      = 10 * time.Second
	RawKeep       = 24 * time.Hour
	RollupStep    = 5 * time.Minute
	RollupKeep    = 90 * 24 * time.Hour
	hourLayout    = "2006010215"
	dayLayout     = "20060102"
	rawRecord     = 17 // time int64, metric byte, value float64
	rollupRecord  = 41 // time int64, metric byte, min avg max last float64
	downtimeAfter = 25 * time.Second
)

// Gap reasons the store names itself.
const (
	ReasonNotRunning = "no samples: the metrics plugin or the Machine was down"
)

// Store keeps Metric Samples and Rollups on disk.
type Store struct {
	dir      string
	mu       sync.Mutex
	subjects map[string]Subject
	subDirty bool
	state    storeState
}

type storeState struct {
	LastTick      int64 `json:"last_tick_unix_nano,omitempty"`
	FoldedThrough int64 `json:"folded_through_unix_nano,omitempty"`
}

// downtime is a range with no samples at all.
type downtime struct {
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Reason string `json:"reason"`
}

// gapRec is a value that could not be read.
type gapRec struct {
	T      int64  `json:"t"`
	Key    string `json:"k"`
	Metric string `json:"m"`
	Reason string `json:"r"`
}

// Open opens (or creates) the store in dir, deleting one in another format.
func Open(dir string) (*Store, error) {
	if err := obsfs.OpenVersioned(dir, FormatVersion); err != nil {
		return nil, fmt.Errorf("metrics store: %w", err)
	}
	s := &Store{dir: dir, subjects: map[string]Subject{}}
	if err := obsfs.LoadJSON(filepath.Join(dir, "subjects.json"), &s.subjects); err != nil {
		return nil, fmt.Errorf("metrics store: subjects.json: %w", err)
	}
	if err := obsfs.LoadJSON(filepath.Join(dir, "state.json"), &s.state); err != nil {
		return nil, fmt.Errorf("metrics store: state.json: %w", err)
	}
	return s, nil
}

// Started records, when the last tick is older than downtimeAfter, that
// nothing was sampled between it and now: a named gap for the Machine.
func (s *Store) Started(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.LastTick == 0 || now.Sub(time.Unix(0, s.state.LastTick)) <= downtimeAfter {
		return nil
	}
	b, _ := json.Marshal(downtime{From: s.state.LastTick, To: now.UnixNano(), Reason: ReasonNotRunning})
	return obsfs.AppendFile(filepath.Join(s.dir, "downtime.jsonl"), append(b, '\n'))
}

func fileKey(key string) string { return url.PathEscape(key) }

// Write stores one tick.
func (s *Store) Write(t Tick) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	hour := t.Time.UTC().Format(hourLayout)
	dir := filepath.Join(s.dir, "raw", hour)
	ts := t.Time.UnixNano()
	var errs []error
	var gaps []byte
	for key, vs := range t.Values {
		if sub, ok := t.Subjects[key]; ok && s.subjects[key] != sub {
			s.subjects[key] = sub
			s.subDirty = true
		}
		var b []byte
		for _, v := range vs {
			id, ok := metricID(v.Metric)
			if !ok {
				continue
			}
			val := v.Value
			if v.Gap != "" {
				val = math.NaN()
				g, _ := json.Marshal(gapRec{T: ts, Key: key, Metric: v.Metric, Reason: v.Gap})
				gaps = append(append(gaps, g...), '\n')
			}
			b = binary.BigEndian.AppendUint64(b, uint64(ts))
			b = append(b, id)
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(val))
		}
		if err := obsfs.AppendFile(filepath.Join(dir, fileKey(key)+".bin"), b); err != nil {
			errs = append(errs, err)
		}
	}
	if len(gaps) > 0 {
		errs = append(errs, obsfs.AppendFile(filepath.Join(dir, "gaps.jsonl"), gaps))
	}
	errs = append(errs, s.writeMarkers(t.Markers))
	if s.subDirty {
		if err := obsfs.SaveJSON(filepath.Join(s.dir, "subjects.json"), s.subjects); err == nil {
			s.subDirty = false
		} else {
			errs = append(errs, err)
		}
	}
	s.state.LastTick = ts
	errs = append(errs, obsfs.SaveJSON(filepath.Join(s.dir, "state.json"), s.state))
	return errors.Join(errs...)
}

// sample is one decoded raw record.
type sample struct {
	t      int64
	metric byte
	v      float64
}

func readRaw(path string, fn func(sample)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// A record torn by a crash (a short tail) is ignored.
	for ; len(b) >= rawRecord; b = b[rawRecord:] {
		fn(sample{t: int64(binary.BigEndian.Uint64(b[:8])), metric: b[8], v: math.Float64frombits(binary.BigEndian.Uint64(b[9:rawRecord]))})
	}
	return nil
}

// listDirs lists the subdirectories of dir/sub whose names parse with
// layout, oldest first.
func (s *Store) listDirs(sub, layout string) []string {
	es, _ := os.ReadDir(filepath.Join(s.dir, sub))
	var out []string
	for _, e := range es {
		if _, err := time.ParseInLocation(layout, e.Name(), time.UTC); err == nil && e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// Size is the store's bytes on disk.
func (s *Store) Size() int64 { return obsfs.Size(s.dir) }
