package metrics

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Query selects series. Exactly one kind of subject: the Machine, the
// Containers matching Container, or a Service or Deployment (the sum of
// its Containers); with none of them, every Container separately.
type Query struct {
	Machine    bool
	Container  string // id prefix (4+) or name
	Namespace  string
	Service    string
	Deployment string
	Metrics    []string // empty: all
	From, To   int64
	Step       time.Duration
}

// Point is one value; a Rollup's Value is its average.
type Point struct {
	T              int64
	Value          float64
	Min, Max, Last float64
	Rollup         bool
}

// Series is one metric of one subject.
type Series struct {
	Metric  string
	Subject Subject
	Points  []Point
}

// Gap is a range where a value could not be read, and why. A nil Subject
// means the whole Machine.
type Gap struct {
	Metric   string
	Subject  *Subject
	From, To int64
	Reason   string
}

// Result is a query's answer.
type Result struct {
	Series     []Series
	Gaps       []Gap
	Resolution time.Duration
	Markers    []Marker
}

func (q Query) wants(metric string) bool {
	if len(q.Metrics) == 0 {
		return true
	}
	for _, m := range q.Metrics {
		if m == metric {
			return true
		}
	}
	return false
}

// members returns the subjects (by key) the query reads, and for a
// Service or Deployment the group key each Container sums into.
func (s *Store) members(q Query) (keys map[string]Subject, group map[string]string) {
	keys, group = map[string]Subject{}, map[string]string{}
	if q.Machine {
		keys["machine"] = Subject{}
		return keys, group
	}
	for k, sub := range s.subjects {
		if sub.Container == "" || (q.Namespace != "" && sub.Namespace != q.Namespace) {
			continue
		}
		switch {
		case q.Container != "":
			if sub.Name != q.Container && !(len(q.Container) >= 4 && strings.HasPrefix(sub.Container, q.Container)) {
				continue
			}
		case q.Deployment != "":
			if sub.Deployment != q.Deployment && !(len(q.Deployment) >= 4 && strings.HasPrefix(sub.Deployment, q.Deployment)) {
				continue
			}
			group[k] = "d-" + sub.Namespace + "/" + sub.Deployment
		case q.Service != "":
			if sub.Service != q.Service {
				continue
			}
			group[k] = "s-" + sub.Namespace + "/" + sub.Service
		}
		keys[k] = sub
	}
	return keys, group
}

// groupSubject describes a Service or Deployment series.
func groupSubject(g string, members map[string]Subject, group map[string]string) Subject {
	for k, gk := range group {
		if gk == g {
			m := members[k]
			out := Subject{Namespace: m.Namespace}
			if strings.HasPrefix(g, "s-") {
				out.Service = m.Service
			} else {
				out.Service, out.Deployment = m.Service, m.Deployment
			}
			return out
		}
	}
	return Subject{}
}

// Query answers q at now: raw Metric Samples when the range is within
// the last 24 hours and a step under 5 minutes is asked, else Rollups.
func (s *Store) Query(q Query, now time.Time) (Result, error) {
	s.mu.Lock()
	members, group := s.members(q)
	s.mu.Unlock()
	if q.To == 0 {
		q.To = now.UnixNano()
	}
	// A minute of slack: "the last 24 h" asked a moment ago still reads
	// samples (they are deleted only after a whole hour passed 24 h).
	raw := q.Step < RollupStep && q.From >= now.Add(-RawKeep-time.Minute).UnixNano()
	want := make([]bool, len(metricIDs))
	for i, m := range metricIDs {
		want[i] = q.wants(m)
	}
	var res Result
	type seriesKey struct{ key, metric string }
	points := map[seriesKey][]Point{}
	gapAt := map[seriesKey]map[int64]string{}
	if raw {
		res.Resolution = Interval
		// A Service's value at a tick is the sum of its Containers' values
		// at that tick (every subject of a tick shares its time).
		type tickSums struct {
			idx map[int64]int
			pts []Point
		}
		sums := map[seriesKey]*tickSums{}
		for _, h := range s.listDirs("raw", hourLayout) {
			start, _ := time.ParseInLocation(hourLayout, h, time.UTC)
			if start.UnixNano() > q.To || start.Add(time.Hour).UnixNano() <= q.From {
				continue
			}
			for key := range members {
				byMetric := make([][]Point, len(metricIDs))
				_ = readRaw(filepath.Join(s.dir, "raw", h, fileKey(key)+".bin"), func(sm sample) {
					if sm.t < q.From || sm.t > q.To || int(sm.metric) >= len(metricIDs) || !want[sm.metric] || math.IsNaN(sm.v) {
						return
					}
					byMetric[sm.metric] = append(byMetric[sm.metric], Point{T: sm.t, Value: sm.v})
				})
				g, grouped := group[key]
				for id, ps := range byMetric {
					if len(ps) == 0 {
						continue
					}
					if !grouped {
						sk := seriesKey{key, metricIDs[id]}
						points[sk] = append(points[sk], ps...)
						continue
					}
					sk := seriesKey{g, metricIDs[id]}
					ts := sums[sk]
					if ts == nil {
						ts = &tickSums{idx: map[int64]int{}}
						sums[sk] = ts
					}
					for _, p := range ps {
						if i, ok := ts.idx[p.T]; ok {
							ts.pts[i].Value += p.Value
						} else {
							ts.idx[p.T] = len(ts.pts)
							ts.pts = append(ts.pts, p)
						}
					}
				}
			}
			s.readGaps(h, func(g gapRec) {
				if _, ok := members[g.Key]; !ok || g.T < q.From || g.T > q.To || !q.wants(g.Metric) {
					return
				}
				key := g.Key
				if gk, ok := group[key]; ok {
					key = gk
				}
				sk := seriesKey{key, g.Metric}
				if gapAt[sk] == nil {
					gapAt[sk] = map[int64]string{}
				}
				gapAt[sk][g.T] = g.Reason
			})
		}
		for sk, ts := range sums {
			points[sk] = append(points[sk], ts.pts...)
		}
	} else {
		res.Resolution = RollupStep
		keys := map[string]bool{}
		for k := range members {
			if g, ok := group[k]; ok {
				keys[g] = true
			} else {
				keys[k] = true
			}
		}
		for _, d := range s.listDirs("rollup", dayLayout) {
			start, _ := time.ParseInLocation(dayLayout, d, time.UTC)
			if start.UnixNano() > q.To || start.Add(24*time.Hour).UnixNano() <= q.From {
				continue
			}
			for key := range keys {
				_ = readRollups(filepath.Join(s.dir, "rollup", d, fileKey(key)+".bin"), func(r rollupRec) {
					if r.t < q.From-int64(RollupStep) || r.t > q.To || int(r.metric) >= len(metricIDs) || !q.wants(metricIDs[r.metric]) {
						return
					}
					sk := seriesKey{key, metricIDs[r.metric]}
					points[sk] = append(points[sk], Point{T: r.t, Value: r.avg, Min: r.min, Max: r.max, Last: r.last, Rollup: true})
				})
			}
		}
	}
	subjectOf := func(key string) Subject {
		if sub, ok := members[key]; ok {
			return sub
		}
		return groupSubject(key, members, group)
	}
	for sk, ps := range points {
		sort.Slice(ps, func(i, j int) bool { return ps[i].T < ps[j].T })
		res.Series = append(res.Series, Series{Metric: sk.metric, Subject: subjectOf(sk.key), Points: ps})
	}
	sort.Slice(res.Series, func(i, j int) bool {
		a, b := res.Series[i], res.Series[j]
		if a.Subject.Key() != b.Subject.Key() {
			return a.Subject.Key()+a.Subject.Service < b.Subject.Key()+b.Subject.Service
		}
		return a.Metric < b.Metric
	})
	for sk, ticks := range gapAt {
		sub := subjectOf(sk.key)
		res.Gaps = append(res.Gaps, joinGaps(sk.metric, &sub, ticks)...)
	}
	for _, d := range s.downtimes() {
		if d.To >= q.From && d.From <= q.To {
			res.Gaps = append(res.Gaps, Gap{Metric: "*", From: d.From, To: d.To, Reason: d.Reason})
		}
	}
	sort.Slice(res.Gaps, func(i, j int) bool { return res.Gaps[i].From < res.Gaps[j].From })
	res.Markers = s.markersIn(q.From, q.To, func(sub Subject) bool {
		_, ok := members[sub.Key()]
		return q.Machine || ok
	})
	return res, nil
}

// joinGaps turns the ticks at which a value was missing into ranges of
// one reason each.
func joinGaps(metric string, sub *Subject, ticks map[int64]string) []Gap {
	ts := make([]int64, 0, len(ticks))
	for t := range ticks {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	var out []Gap
	for _, t := range ts {
		r := ticks[t]
		if n := len(out); n > 0 && out[n-1].Reason == r && t-out[n-1].To <= int64(3*Interval/2) {
			out[n-1].To = t
			continue
		}
		out = append(out, Gap{Metric: metric, Subject: sub, From: t, To: t, Reason: r})
	}
	return out
}

func (s *Store) readGaps(hour string, fn func(gapRec)) {
	f, err := os.Open(filepath.Join(s.dir, "raw", hour, "gaps.jsonl"))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var g gapRec
		if json.Unmarshal(sc.Bytes(), &g) == nil {
			fn(g)
		}
	}
}

func (s *Store) downtimes() []downtime {
	f, err := os.Open(filepath.Join(s.dir, "downtime.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []downtime
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d downtime
		if json.Unmarshal(sc.Bytes(), &d) == nil {
			out = append(out, d)
		}
	}
	return out
}
