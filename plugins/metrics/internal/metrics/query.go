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
	if q.To == 0 {
		q.To = now.UnixNano()
	}
	r := s.newQueryRun(q)
	var res Result
	// A minute of slack: "the last 24 h" asked a moment ago still reads
	// samples (they are deleted only after a whole hour passed 24 h).
	if q.Step < RollupStep && q.From >= now.Add(-RawKeep-time.Minute).UnixNano() {
		res.Resolution = Interval
		r.readRaw()
	} else {
		res.Resolution = RollupStep
		r.readRollups()
	}
	r.series(&res)
	r.gaps(&res)
	res.Markers = s.markersIn(q.From, q.To, func(sub Subject) bool {
		_, ok := r.members[sub.Key()]
		return q.Machine || ok
	})
	return res, nil
}

// seriesKey names one series: a Subject's key (a member's, or its
// group's) and a metric.
type seriesKey struct{ key, metric string }

// tickSums adds up a group's members' values tick by tick.
type tickSums struct {
	idx map[int64]int
	pts []Point
}

// queryRun is one Query: the Subjects it reads (members, and the group
// each belongs to when a Service or Deployment is asked for) and what it
// gathered.
type queryRun struct {
	s       *Store
	q       Query
	members map[string]Subject
	group   map[string]string
	want    []bool // by metric id
	points  map[seriesKey][]Point
	gapAt   map[seriesKey]map[int64]string
}

func (s *Store) newQueryRun(q Query) *queryRun {
	s.mu.Lock()
	members, group := s.members(q)
	s.mu.Unlock()
	r := &queryRun{s: s, q: q, members: members, group: group, want: make([]bool, len(metricIDs)),
		points: map[seriesKey][]Point{}, gapAt: map[seriesKey]map[int64]string{}}
	for i, m := range metricIDs {
		r.want[i] = q.wants(m)
	}
	return r
}

// seriesOf is the series key a member's values count under.
func (r *queryRun) seriesOf(key, metric string) seriesKey {
	if g, ok := r.group[key]; ok {
		return seriesKey{g, metric}
	}
	return seriesKey{key, metric}
}

// readRaw reads the samples and gaps of every hour in range. A group's
// value at a tick is the sum of its members' values at that tick (every
// subject of a tick shares its time).
func (r *queryRun) readRaw() {
	sums := map[seriesKey]*tickSums{}
	for _, h := range r.s.listDirs("raw", hourLayout) {
		start, _ := time.ParseInLocation(hourLayout, h, time.UTC)
		if start.UnixNano() > r.q.To || start.Add(time.Hour).UnixNano() <= r.q.From {
			continue
		}
		for key := range r.members {
			r.readRawFile(h, key, sums)
		}
		r.s.readGaps(h, r.addGap)
	}
	for sk, ts := range sums {
		r.points[sk] = append(r.points[sk], ts.pts...)
	}
}

// readRawFile reads one member's samples of hour h.
func (r *queryRun) readRawFile(h, key string, sums map[seriesKey]*tickSums) {
	byMetric := make([][]Point, len(metricIDs))
	_ = readRaw(filepath.Join(r.s.dir, "raw", h, fileKey(key)+".bin"), func(sm sample) {
		if sm.t < r.q.From || sm.t > r.q.To || int(sm.metric) >= len(metricIDs) || !r.want[sm.metric] || math.IsNaN(sm.v) {
			return
		}
		byMetric[sm.metric] = append(byMetric[sm.metric], Point{T: sm.t, Value: sm.v})
	})
	_, grouped := r.group[key]
	for id, ps := range byMetric {
		if len(ps) == 0 {
			continue
		}
		sk := r.seriesOf(key, metricIDs[id])
		if !grouped {
			r.points[sk] = append(r.points[sk], ps...)
			continue
		}
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

// addGap records a named gap of a member in range.
func (r *queryRun) addGap(g gapRec) {
	if _, ok := r.members[g.Key]; !ok || g.T < r.q.From || g.T > r.q.To || !r.q.wants(g.Metric) {
		return
	}
	sk := r.seriesOf(g.Key, g.Metric)
	if r.gapAt[sk] == nil {
		r.gapAt[sk] = map[int64]string{}
	}
	r.gapAt[sk][g.T] = g.Reason
}

// readRollups reads the 5-minute Rollups of every day in range, per
// member, or per group when one is asked for (groups are folded as such).
func (r *queryRun) readRollups() {
	keys := map[string]bool{}
	for k := range r.members {
		keys[r.seriesOf(k, "").key] = true
	}
	for _, d := range r.s.listDirs("rollup", dayLayout) {
		start, _ := time.ParseInLocation(dayLayout, d, time.UTC)
		if start.UnixNano() > r.q.To || start.Add(24*time.Hour).UnixNano() <= r.q.From {
			continue
		}
		for key := range keys {
			_ = readRollups(filepath.Join(r.s.dir, "rollup", d, fileKey(key)+".bin"), func(rr rollupRec) {
				if rr.t < r.q.From-int64(RollupStep) || rr.t > r.q.To || int(rr.metric) >= len(metricIDs) || !r.q.wants(metricIDs[rr.metric]) {
					return
				}
				sk := seriesKey{key, metricIDs[rr.metric]}
				r.points[sk] = append(r.points[sk], Point{T: rr.t, Value: rr.avg, Min: rr.min, Max: rr.max, Last: rr.last, Rollup: true})
			})
		}
	}
}

// subject is the Subject a series key names: a member, or its group.
func (r *queryRun) subject(key string) Subject {
	if sub, ok := r.members[key]; ok {
		return sub
	}
	return groupSubject(key, r.members, r.group)
}

// series puts the gathered points in res, each series by time, the
// series by Subject and metric.
func (r *queryRun) series(res *Result) {
	for sk, ps := range r.points {
		sort.Slice(ps, func(i, j int) bool { return ps[i].T < ps[j].T })
		res.Series = append(res.Series, Series{Metric: sk.metric, Subject: r.subject(sk.key), Points: ps})
	}
	sort.Slice(res.Series, func(i, j int) bool {
		a, b := res.Series[i], res.Series[j]
		if a.Subject.Key() != b.Subject.Key() {
			return a.Subject.Key()+a.Subject.Service < b.Subject.Key()+b.Subject.Service
		}
		return a.Metric < b.Metric
	})
}

// gaps puts the named gaps in res: the members' missing values joined
// into ranges, and the times the plugin or Machine was down.
func (r *queryRun) gaps(res *Result) {
	for sk, ticks := range r.gapAt {
		sub := r.subject(sk.key)
		res.Gaps = append(res.Gaps, joinGaps(sk.metric, &sub, ticks)...)
	}
	for _, d := range r.s.downtimes() {
		if d.To >= r.q.From && d.From <= r.q.To {
			res.Gaps = append(res.Gaps, Gap{Metric: "*", From: d.From, To: d.To, Reason: d.Reason})
		}
	}
	sort.Slice(res.Gaps, func(i, j int) bool { return res.Gaps[i].From < res.Gaps[j].From })
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
