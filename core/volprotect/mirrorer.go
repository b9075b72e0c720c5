package volprotect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The scheduled Sync: on the Writer's Machine, each volume whose policy
// declares a Mirror is brought level when its Mirror is older than
// mirror.every, by one Volume Run of the library (core/volumerun: the
// same steps, lease and checks as `ployz volume sync`). The Mirrorer
// only decides when and tracks failures; the run itself is Runs'.

// scheduleOperator prefixes the operator name the Cluster's record of a
// scheduled run carries ("schedule@m1": the Writer's Machine drove it).
const scheduleOperator = "schedule@"

// ScheduleOperator is who a scheduled run on machine is recorded as.
func ScheduleOperator(machine string) string { return scheduleOperator + machine }

// IsScheduled reports whether a run recorded as operator was a
// scheduled one (ScheduleOperator).
func IsScheduled(operator string) bool { return strings.HasPrefix(operator, scheduleOperator) }

// MinBackoff is the wait after a scheduled run's first failure; each
// further failure doubles it, up to the Mirror's every.
const MinBackoff = time.Minute

// Machine is a Cluster Machine as the Mirror's selector reads it.
type Machine struct {
	Name   string
	Labels map[string]string
}

// Runs is the Volume Run library as the Mirrorer uses it.
type Runs interface {
	// Level runs one run bringing volume's Mirror level: a Sync when one
	// of candidates holds a Mirror, else a Mirror run to the first. It
	// answers the run's gen (0: none opened) and how it ended.
	Level(ctx context.Context, volume string, candidates []string) (uint64, error)
}

// BusyError is a run refused before it opened because another holds
// the volume (its lease, an open run): not a failure, it is tried again
// next round.
type BusyError struct{ Err error }

func (e *BusyError) Error() string { return e.Err.Error() }
func (e *BusyError) Unwrap() error { return e.Err }

// MirrorConfig is a Mirrorer's collaborators.
type MirrorConfig struct {
	// Self is this Machine's name (never its own Mirror).
	Self string
	// Policies answers the stored policies.
	Policies func(context.Context) ([]Declared, error)
	// IsWriter reports whether this Machine holds volume's Writer now:
	// only the Writer's Machine schedules its Sync.
	IsWriter func(volume string) bool
	// Lags answers volume's Mirrors' last syncs (the Cluster's runs).
	Lags func(ctx context.Context, volume string) ([]Lag, error)
	// Machines answers the Cluster's participating Machines.
	Machines func(context.Context) ([]Machine, error)
	Runs     Runs
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	Log hclog.Logger
}

// Mirrorer schedules each protected volume's Sync. Round is one pass;
// ployzd loops. A due volume's run goes on in the background, one at a
// time per volume (the volume's lease makes it one Cluster-wide).
type Mirrorer struct {
	cfg MirrorConfig

	mu    sync.Mutex
	state map[string]*mirrorState
	wg    sync.WaitGroup
}

// mirrorState is one volume's schedule on this Machine.
type mirrorState struct {
	running bool
	cancel  context.CancelFunc
	// fails counts the failed runs since the last that succeeded;
	// retryAt is when the next may start.
	fails   int
	retryAt time.Time
	lastErr error
}

// NewMirrorer returns a Mirrorer with cfg's defaults filled in.
func NewMirrorer(cfg MirrorConfig) *Mirrorer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	return &Mirrorer{cfg: cfg, state: map[string]*mirrorState{}}
}

// Round starts the due Syncs of this Machine's Writers and answers when
// the next is due (zero: none known). A volume whose Writer left this
// Machine, or whose policy went, is dropped, its run in flight
// cancelled (a Move takes the lease first, so one rarely is).
func (m *Mirrorer) Round(ctx context.Context) (time.Time, error) {
	ds, err := m.cfg.Policies(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("read volume policies: %w", err)
	}
	here := map[string]Declared{}
	for _, d := range ds {
		if d.Policy.Mirror != nil && m.cfg.IsWriter(d.Volume) {
			here[d.Volume] = d
		}
	}
	m.forgetAllBut(here)
	var machines []Machine
	if len(here) > 0 {
		if machines, err = m.cfg.Machines(ctx); err != nil {
			return time.Time{}, fmt.Errorf("read machines: %w", err)
		}
	}
	var next time.Time
	var errs []error
	names := make([]string, 0, len(here))
	for v := range here {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		n, err := m.volume(ctx, here[v], machines)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", v, err))
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next, errors.Join(errs...)
}

// forgetAllBut drops the state of every volume not in here, cancelling
// its run in flight.
func (m *Mirrorer) forgetAllBut(here map[string]Declared) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for v, s := range m.state {
		if _, ok := here[v]; ok {
			continue
		}
		if s.cancel != nil {
			s.cancel()
		}
		delete(m.state, v)
		m.cfg.Log.Info("scheduled sync stopped: the volume's Writer or policy left this Machine", "volume", v)
	}
}

// volume starts d's run when due and answers when it next is.
func (m *Mirrorer) volume(ctx context.Context, d Declared, machines []Machine) (time.Time, error) {
	now := m.cfg.Now()
	every := d.Policy.Mirror.Interval()
	m.mu.Lock()
	s := m.state[d.Volume]
	if s == nil {
		s = &mirrorState{}
		m.state[d.Volume] = s
	}
	running, retryAt := s.running, s.retryAt
	m.mu.Unlock()
	if running {
		return time.Time{}, nil
	}
	candidates := Candidates(*d.Policy.Mirror, m.cfg.Self, machines)
	if len(candidates) == 0 {
		return now.Add(every), fmt.Errorf("mirror: no participating Machine is %s", d.Policy.Mirror.Selector())
	}
	lags, err := m.cfg.Lags(ctx, d.Volume)
	if err != nil {
		return now.Add(MinBackoff), fmt.Errorf("read mirror lag: %w", err)
	}
	due := dueAt(lags, candidates, every)
	if due.Before(retryAt) {
		due = retryAt
	}
	if now.Before(due) {
		return due, nil
	}
	m.start(ctx, d.Volume, candidates, every)
	return time.Time{}, nil
}

// dueAt is when the Mirror on one of candidates is every old: its
// newest sync plus every; zero (now) when none of them was synced.
func dueAt(lags []Lag, candidates []string, every time.Duration) time.Time {
	var synced time.Time
	for _, l := range lags {
		if contains(candidates, l.Machine) && l.Synced.After(synced) {
			synced = l.Synced
		}
	}
	if synced.IsZero() {
		return time.Time{}
	}
	return synced.Add(every)
}

// Candidates are the Machines mirror may live on, by name, other than
// self.
func Candidates(mirror Mirror, self string, machines []Machine) []string {
	var out []string
	for _, mc := range machines {
		if mc.Name != self && mirror.Matches(mc.Name, mc.Labels) {
			out = append(out, mc.Name)
		}
	}
	sort.Strings(out)
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// start runs volume's Level in the background, marking it running.
func (m *Mirrorer) start(ctx context.Context, volume string, candidates []string, every time.Duration) {
	rctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	s := m.state[volume]
	s.running, s.cancel = true, cancel
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		m.cfg.Log.Info("scheduled sync", "volume", volume, "mirror", strings.Join(candidates, ","))
		gen, err := m.cfg.Runs.Level(rctx, volume, candidates)
		m.ended(volume, gen, err, every)
	}()
}

// ended records how volume's run ended: a failure backs off (doubling
// from MinBackoff up to every), a busy volume is tried next round, a
// success clears the count.
func (m *Mirrorer) ended(volume string, gen uint64, err error, every time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state[volume]
	if s == nil { // forgotten meanwhile (the Writer left)
		return
	}
	s.running, s.cancel = false, nil
	var busy *BusyError
	switch {
	case err == nil:
		s.fails, s.retryAt, s.lastErr = 0, time.Time{}, nil
		m.cfg.Log.Info("scheduled sync done", "volume", volume, "gen", gen)
	case errors.As(err, &busy):
		m.cfg.Log.Debug("scheduled sync waits: the volume is busy", "volume", volume, "error", err)
	default:
		s.fails++
		s.lastErr = err
		s.retryAt = m.cfg.Now().Add(Backoff(s.fails, every))
		m.cfg.Log.Warn("scheduled sync failed", "volume", volume, "gen", gen, "failures", s.fails, "retry_at", s.retryAt.UTC().Format(time.RFC3339), "error", err)
	}
}

// Backoff is the wait after the fails-th failure in a row: MinBackoff,
// doubling, at most every (at least MinBackoff).
func Backoff(fails int, every time.Duration) time.Duration {
	d := MinBackoff
	for i := 1; i < fails && d < every; i++ {
		d *= 2
	}
	return max(min(d, every), MinBackoff)
}

// Failing is volume's failed runs in a row and the last one's error
// (0, nil: none since the last success).
func (m *Mirrorer) Failing(volume string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.state[volume]; s != nil {
		return s.fails, s.lastErr
	}
	return 0, nil
}

// Wait waits for the runs in flight (tests, and ployzd's shutdown).
func (m *Mirrorer) Wait() { m.wg.Wait() }
