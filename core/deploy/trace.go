package deploy

import (
	"slices"
	"sync"
	"time"
)

// Timing is one span of a deploy: a step on a Machine or a phase of the
// CLI (build, deliver_images, observe, plan, save, execute). Offsets are
// from the start of the deploy, so the spans show where the time went and
// what ran at once.
type Timing struct {
	Machine    string  `json:"machine,omitempty"`
	Kind       string  `json:"kind"`
	Service    string  `json:"service,omitempty"`
	Container  string  `json:"container,omitempty"`
	StartMS    float64 `json:"start_ms"`
	DurationMS float64 `json:"duration_ms"`
}

// Trace collects a deploy's Timings.
type Trace struct {
	t0    time.Time
	mu    sync.Mutex
	spans []Timing
}

// NewTrace starts a trace now.
func NewTrace() *Trace { return &Trace{t0: time.Now()} }

// Phase starts a CLI phase; the returned func ends it.
func (t *Trace) Phase(kind string) func() {
	start := time.Now()
	return func() { t.add(Timing{Kind: kind}, start, time.Since(start)) }
}

func (t *Trace) add(tm Timing, start time.Time, d time.Duration) {
	tm.StartMS = ms(start.Sub(t.t0))
	tm.DurationMS = ms(d)
	t.mu.Lock()
	t.spans = append(t.spans, tm)
	t.mu.Unlock()
}

// Steps adds the steps of an executed plan that ran.
func (t *Trace) Steps(o Outcome) {
	for _, s := range o.Steps {
		if s.began.IsZero() {
			continue
		}
		t.add(Timing{Machine: s.Machine, Kind: s.Action, Service: s.Service, Container: s.Container}, s.began, s.took)
	}
}

// Timings returns the spans by start.
func (t *Trace) Timings() []Timing {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.spans)
	slices.SortStableFunc(out, func(a, b Timing) int {
		switch {
		case a.StartMS < b.StartMS:
			return -1
		case a.StartMS > b.StartMS:
			return 1
		}
		return 0
	})
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
