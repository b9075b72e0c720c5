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
	"strings"
	"sync"
	"time"

	"github.com/ployz/ployz/internal/fsutil"
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
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("metrics store: %w", err)
	}
	vf := filepath.Join(dir, "FORMAT")
	b, err := os.ReadFile(vf)
	if err != nil || strings.TrimSpace(string(b)) != FormatVersion {
		if err == nil || !os.IsNotExist(err) || !emptyDir(dir) {
			if err := os.RemoveAll(dir); err != nil {
				return nil, fmt.Errorf("metrics store: remove unknown format: %w", err)
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, err
			}
		}
		if err := os.WriteFile(vf, []byte(FormatVersion+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	s := &Store{dir: dir, subjects: map[string]Subject{}}
	if err := loadJSON(filepath.Join(dir, "subjects.json"), &s.subjects); err != nil {
		return nil, fmt.Errorf("metrics store: subjects.json: %w", err)
	}
	if err := loadJSON(filepath.Join(dir, "state.json"), &s.state); err != nil {
		return nil, fmt.Errorf("metrics store: state.json: %w", err)
	}
	return s, nil
}

func emptyDir(dir string) bool {
	es, err := os.ReadDir(dir)
	return err == nil && len(es) == 0
}

func loadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func saveJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, b, 0o600)
}

func appendFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
	return appendFile(filepath.Join(s.dir, "downtime.jsonl"), append(b, '\n'))
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
		if err := appendFile(filepath.Join(dir, fileKey(key)+".bin"), b); err != nil {
			errs = append(errs, err)
		}
	}
	if len(gaps) > 0 {
		errs = append(errs, appendFile(filepath.Join(dir, "gaps.jsonl"), gaps))
	}
	if s.subDirty {
		if err := saveJSON(filepath.Join(s.dir, "subjects.json"), s.subjects); err == nil {
			s.subDirty = false
		} else {
			errs = append(errs, err)
		}
	}
	s.state.LastTick = ts
	errs = append(errs, saveJSON(filepath.Join(s.dir, "state.json"), s.state))
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
func (s *Store) Size() int64 {
	var n int64
	_ = filepath.WalkDir(s.dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
