package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ployz/ployz/plugins/internal/obsfs"
)

// agg folds values into one Rollup.
type agg struct {
	min, max, sum, last float64
	n                   int
	lastT               int64
}

func (a *agg) add(v float64, t int64) {
	if a.n == 0 || v < a.min {
		a.min = v
	}
	if a.n == 0 || v > a.max {
		a.max = v
	}
	a.sum += v
	a.n++
	if t >= a.lastT {
		a.last, a.lastT = v, t
	}
}

type aggKey struct {
	metric byte
	bucket int64
}

// groupKeys are the Rollup subjects a Container's values also count
// towards: its Service and its Deployment (sums over its Containers).
func groupKeys(s Subject) []string {
	var out []string
	if s.Service != "" {
		out = append(out, "s-"+s.Namespace+"/"+s.Service)
	}
	if s.Deployment != "" {
		out = append(out, "d-"+s.Namespace+"/"+s.Deployment)
	}
	return out
}

func bucketOf(t int64) int64 { return t - t%int64(RollupStep) }

// Fold folds every closed hour not folded yet into 5-minute Rollups, then
// deletes raw hours past RawKeep and Rollup days past RollupKeep.
func (s *Store) Fold(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, h := range s.listDirs("raw", hourLayout) {
		start, _ := time.ParseInLocation(hourLayout, h, time.UTC)
		end := start.Add(time.Hour)
		if end.After(now.Add(-time.Minute)) {
			break // not closed yet (a late tick may still land)
		}
		if end.UnixNano() <= s.state.FoldedThrough {
			continue
		}
		if err := s.foldHour(h, start); err != nil {
			errs = append(errs, fmt.Errorf("fold %s: %w", h, err))
			continue
		}
		s.state.FoldedThrough = end.UnixNano()
		errs = append(errs, obsfs.SaveJSON(filepath.Join(s.dir, "state.json"), s.state))
	}
	for _, h := range s.listDirs("raw", hourLayout) {
		start, _ := time.ParseInLocation(hourLayout, h, time.UTC)
		end := start.Add(time.Hour)
		if !end.After(now.Add(-RawKeep)) && end.UnixNano() <= s.state.FoldedThrough {
			errs = append(errs, os.RemoveAll(filepath.Join(s.dir, "raw", h)))
		}
	}
	for _, d := range s.listDirs("rollup", dayLayout) {
		start, _ := time.ParseInLocation(dayLayout, d, time.UTC)
		if !start.Add(24 * time.Hour).After(now.Add(-RollupKeep)) {
			errs = append(errs, os.RemoveAll(filepath.Join(s.dir, "rollup", d)))
		}
	}
	return errors.Join(errs...)
}

func (s *Store) foldHour(h string, start time.Time) error {
	dir := filepath.Join(s.dir, "raw", h)
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	aggs := map[string]map[aggKey]*agg{}
	sums := map[string]map[aggKey]map[int64]float64{} // group -> metric/bucket -> tick -> sum
	add := func(key string, k aggKey, v float64, t int64) {
		m := aggs[key]
		if m == nil {
			m = map[aggKey]*agg{}
			aggs[key] = m
		}
		a := m[k]
		if a == nil {
			a = &agg{}
			m[k] = a
		}
		a.add(v, t)
	}
	for _, e := range es {
		name, ok := strings.CutSuffix(e.Name(), ".bin")
		if !ok {
			continue
		}
		key, err := url.PathUnescape(name)
		if err != nil {
			continue
		}
		groups := groupKeys(s.subjects[key])
		err = readRaw(filepath.Join(dir, e.Name()), func(sm sample) {
			if math.IsNaN(sm.v) {
				return
			}
			k := aggKey{metric: sm.metric, bucket: bucketOf(sm.t)}
			add(key, k, sm.v, sm.t)
			for _, g := range groups {
				if sums[g] == nil {
					sums[g] = map[aggKey]map[int64]float64{}
				}
				if sums[g][k] == nil {
					sums[g][k] = map[int64]float64{}
				}
				sums[g][k][sm.t] += sm.v
			}
		})
		if err != nil {
			return err
		}
	}
	for g, byKey := range sums {
		for k, ticks := range byKey {
			for t, v := range ticks {
				add(g, k, v, t)
			}
		}
	}
	day := start.Format(dayLayout)
	var errs []error
	for key, m := range aggs {
		var b []byte
		for k, a := range m {
			b = binary.BigEndian.AppendUint64(b, uint64(k.bucket))
			b = append(b, k.metric)
			for _, v := range []float64{a.min, a.sum / float64(a.n), a.max, a.last} {
				b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
			}
		}
		errs = append(errs, obsfs.AppendFile(filepath.Join(s.dir, "rollup", day, fileKey(key)+".bin"), b))
	}
	return errors.Join(errs...)
}

// rollupRec is one decoded Rollup.
type rollupRec struct {
	t                   int64
	metric              byte
	min, avg, max, last float64
}

func readRollups(path string, fn func(rollupRec)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for len(b) >= rollupRecord {
		f := func(i int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(b[9+8*i:])) }
		fn(rollupRec{t: int64(binary.BigEndian.Uint64(b)), metric: b[8], min: f(0), avg: f(1), max: f(2), last: f(3)})
		b = b[rollupRecord:]
	}
	if len(b) > 0 {
		return io.ErrUnexpectedEOF
	}
	return nil
}
