package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// Defaults of Config's durations.
const (
	// DefaultGrace: a tick nobody started this long after its time is
	// recorded missed instead of run late.
	DefaultGrace = 2 * time.Minute
	// DefaultStale: a running run whose Machine has not seen it alive
	// for this long is recorded lost (its Machine is down or gone).
	DefaultStale = 3 * time.Minute
	// lookback bounds the ticks one round examines per job: a Cluster
	// down for a day reports the last day's ticks missed, not a year's.
	lookback      = 24 * time.Hour
	maxTicksRound = 100
)

// ErrGone is Runner.Wait's answer for a run whose Container is gone.
var ErrGone = errors.New("the run's Container is gone")

// Runner starts and watches this Machine's runs.
type Runner interface {
	// Start creates and starts a detached run named name from job's
	// stored spec and answers the Container's id.
	Start(ctx context.Context, job store.JobBody, name string) (id string, err error)
	// Wait blocks until run id ended and answers its exit code (ErrGone
	// when its Container no longer exists).
	Wait(ctx context.Context, id string) (exitCode int, err error)
}

// Config is a Scheduler's Machine and collaborators.
type Config struct {
	Store                  *sdkstore.Client
	MachineID, MachineName string
	Runner                 Runner
	// Admits reports whether this Machine may run job now (participating,
	// not drained, admitted by the job's placement); nil admits all.
	Admits func(context.Context, store.JobBody) bool
	// Now is the clock (nil: time.Now).
	Now          func() time.Time
	Grace, Stale time.Duration
	// Settle waits, after a claim, for a concurrent claim through another
	// Machine's store to merge (nil: no wait).
	Settle func(context.Context)
	// Outcome, when set, is told each run this Scheduler recorded a
	// final status for (ployzd counts them for the metrics plugin).
	Outcome func(store.JobRunBody)
	Log     hclog.Logger
}

// Scheduler claims and runs the ticks of the stored jobs this Machine
// admits. Round is one pass; the caller loops (ployzd's jobs loop).
type Scheduler struct {
	cfg Config
	// round serializes rounds: a run this process claimed and is still
	// starting must not look like one a previous ployzd left.
	round sync.Mutex
	mu    sync.Mutex
	// waiting are the run keys whose end a goroutine of this process
	// waits for.
	waiting map[string]bool
	wg      sync.WaitGroup
}

// New returns a Scheduler with cfg's defaults filled in.
func New(cfg Config) *Scheduler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Stale <= 0 {
		cfg.Stale = DefaultStale
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	return &Scheduler{cfg: cfg, waiting: map[string]bool{}}
}

// Wait returns once every run-end watcher of this Scheduler returned
// (their context ended or their run ended).
func (s *Scheduler) Wait() { s.wg.Wait() }

// Round examines every stored job once and answers the earliest next
// tick among them (zero when there is none).
func (s *Scheduler) Round(ctx context.Context) (time.Time, error) {
	s.round.Lock()
	defer s.round.Unlock()
	rows, err := store.Jobs(s.cfg.Store).List(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("read jobs: %w", err)
	}
	var next time.Time
	var errs []error
	for _, r := range rows {
		n, err := s.job(ctx, r.Key, r.Body)
		if err != nil {
			errs = append(errs, fmt.Errorf("job %s: %w", r.Key, err))
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next, errors.Join(errs...)
}

// job tends one job: its running runs (watched here, or lost
// elsewhere), then each due tick without a row.
func (s *Scheduler) job(ctx context.Context, key string, job store.JobBody) (time.Time, error) {
	sch := Schedule{Cron: job.Cron, Timezone: job.Timezone, Concurrency: job.Concurrency}
	now := s.cfg.Now()
	from := now.Add(-lookback)
	if since := time.UnixMilli(job.Since); job.Since > 0 && since.After(from) {
		from = since
	}
	ticks, err := sch.Ticks(from, now, maxTicksRound)
	if err != nil {
		return time.Time{}, err
	}
	next := sch.Next(now)
	since := now.UnixMilli()
	if len(ticks) > 0 {
		since = ticks[0].UnixMilli()
	}
	runs, err := store.LiveJobRuns(ctx, s.cfg.Store, key, since)
	if err != nil {
		return next, err
	}
	busy, err := s.tendRunning(ctx, runs, now)
	if err != nil {
		return next, err
	}
	if s.cfg.Admits != nil && !s.cfg.Admits(ctx, job) {
		return next, nil
	}
	have := map[int64]bool{}
	for _, r := range runs {
		have[r.Body.Tick] = true
	}
	for _, t := range ticks {
		if have[t.UnixMilli()] {
			continue
		}
		ran, err := s.tick(ctx, key, job, t, now, busy && sch.Concurrency != ConcurrencyAllow)
		if err != nil {
			return next, err
		}
		busy = busy || ran
	}
	return next, nil
}

// tendRunning watches this Machine's running runs and keeps them seen,
// and reports whether a run still runs (one whose Machine stopped
// reporting it does not count).
func (s *Scheduler) tendRunning(ctx context.Context, runs []sdkstore.Row[store.JobRunBody], now time.Time) (bool, error) {
	busy := false
	for _, r := range runs {
		if r.Body.Status != store.JobRunRunning {
			continue
		}
		mine := r.Body.Machine == s.cfg.MachineID
		switch {
		case mine && s.watching(r.Key):
			busy = true
			if now.Sub(time.UnixMilli(r.Body.Seen)) > s.cfg.Stale/4 {
				if err := s.update(ctx, r.Key, func(b *store.JobRunBody) { b.Seen = now.UnixMilli() }); err != nil {
					return busy, err
				}
			}
		case mine && r.Body.ContainerID != "":
			// A previous ployzd started it: watch it again.
			busy = true
			s.watch(ctx, r.Key, r.Body.ContainerID, time.UnixMilli(r.Body.Started))
		case mine:
			if err := s.update(ctx, r.Key, func(b *store.JobRunBody) {
				if b.Status == store.JobRunRunning {
					b.Status, b.Ended = store.JobRunLost, now.UnixMilli()
					b.Error = "its Machine restarted before the run's Container was started"
				}
			}); err != nil {
				return busy, err
			}
		case Stale(r.Body, now, s.cfg.Stale):
			// Its Machine stopped reporting it: no longer a run that
			// forbids the next. Only that Machine writes its row; readers
			// answer it lost (Stale).
		default:
			busy = true
		}
	}
	return busy, nil
}

// tick claims tick t of job: missed when it is past the grace period,
// skipped when a run is still running (forbid), else run here. ran
// reports a run started.
func (s *Scheduler) tick(ctx context.Context, key string, job store.JobBody, t, now time.Time, busy bool) (ran bool, err error) {
	body := store.JobRunBody{Job: key, Tick: t.UnixMilli(), Machine: s.cfg.MachineID, MachineName: s.cfg.MachineName,
		Nonce: nonce(), Seen: now.UnixMilli()}
	switch {
	case now.Sub(t) > s.cfg.Grace:
		body.Status = store.JobRunMissed
		body.Error = fmt.Sprintf("not started within %s of its tick", s.cfg.Grace)
	case busy:
		body.Status = store.JobRunSkipped
		body.Error = "a previous run was still running (concurrency forbid)"
	default:
		body.Status = store.JobRunRunning
	}
	won, err := s.claim(ctx, body)
	if err != nil || !won {
		return false, err
	}
	if body.Status != store.JobRunRunning {
		s.outcome(body)
		return false, nil
	}
	s.start(ctx, key, job, body, now)
	return true, nil
}

// claim inserts the tick's row and, once a concurrent claim through
// another store had time to merge, re-reads it: won only when the row
// kept this claim's nonce.
func (s *Scheduler) claim(ctx context.Context, b store.JobRunBody) (bool, error) {
	k := store.JobRunKey(b.Job, b.Tick)
	ok, err := store.ClaimJobRun(ctx, s.cfg.Store, sdkstore.Row[store.JobRunBody]{Key: k, Owner: s.cfg.MachineID, Body: b, UpdatedAt: s.cfg.Now().UnixMilli()})
	if err != nil || !ok {
		return false, err
	}
	if s.cfg.Settle != nil {
		s.cfg.Settle(ctx)
	}
	row, found, err := store.JobRuns(s.cfg.Store).Get(ctx, k)
	if err != nil {
		return false, err
	}
	return found && row.Body.Nonce == b.Nonce, nil
}

// start starts the claimed run and records its Container, or its
// failure to start.
func (s *Scheduler) start(ctx context.Context, key string, job store.JobBody, b store.JobRunBody, now time.Time) {
	k := store.JobRunKey(key, b.Tick)
	name := job.Namespace + "-" + job.Service + "-job-" + b.Nonce[:6]
	id, err := s.cfg.Runner.Start(ctx, job, name)
	if err != nil {
		s.cfg.Log.Warn("job: run did not start", "job", key, "error", err)
		if uerr := s.update(ctx, k, func(r *store.JobRunBody) {
			r.Status, r.Error, r.Ended = store.JobRunFailed, "start: "+err.Error(), s.cfg.Now().UnixMilli()
		}); uerr != nil {
			s.cfg.Log.Warn("job: record start failure", "job", key, "error", uerr)
		}
		return
	}
	started := s.cfg.Now()
	if err := s.update(ctx, k, func(r *store.JobRunBody) {
		r.Container, r.ContainerID, r.Started, r.Seen = name, id, started.UnixMilli(), started.UnixMilli()
	}); err != nil {
		s.cfg.Log.Warn("job: record start", "job", key, "error", err)
	}
	s.cfg.Log.Info("job: run started", "job", key, "tick", time.UnixMilli(b.Tick).UTC(), "container", name)
	s.watch(ctx, k, id, started)
}

func (s *Scheduler) watching(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting[k]
}

// watch waits, in the background, for run id to end and records how.
// A context that ends first (ployzd stopping) leaves the row running;
// the next ployzd watches it again.
func (s *Scheduler) watch(ctx context.Context, k, id string, started time.Time) {
	s.mu.Lock()
	if s.waiting[k] {
		s.mu.Unlock()
		return
	}
	s.waiting[k] = true
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.waiting, k)
			s.mu.Unlock()
		}()
		code, err := s.cfg.Runner.Wait(ctx, id)
		if ctx.Err() != nil {
			return
		}
		ended := s.cfg.Now()
		if uerr := s.update(context.WithoutCancel(ctx), k, func(r *store.JobRunBody) { endRun(r, code, err, started, ended) }); uerr != nil {
			s.cfg.Log.Warn("job: record end", "run", k, "error", uerr)
		}
	}()
}

// endRun records a run's end: its exit code, or lost when it could not
// be read.
func endRun(r *store.JobRunBody, code int, err error, started, ended time.Time) {
	r.Ended, r.Seen = ended.UnixMilli(), ended.UnixMilli()
	if !started.IsZero() && started.UnixMilli() > 0 {
		r.DurationMS = ended.Sub(started).Milliseconds()
	}
	switch {
	case err != nil:
		r.Status, r.Error = store.JobRunLost, err.Error()
	case code == 0:
		r.Status, r.ExitCode = store.JobRunSucceeded, &code
	default:
		r.Status, r.ExitCode, r.Error = store.JobRunFailed, &code, fmt.Sprintf("exit code %d", code)
	}
}

// update rewrites run k's row with f applied.
func (s *Scheduler) update(ctx context.Context, k string, f func(*store.JobRunBody)) error {
	t := store.JobRuns(s.cfg.Store)
	row, ok, err := t.Get(ctx, k)
	if err != nil || !ok {
		return err
	}
	was := row.Body.Status
	f(&row.Body)
	row.Owner, row.UpdatedAt = s.cfg.MachineID, 0
	if _, err = t.Put(ctx, row); err != nil {
		return err
	}
	if was == store.JobRunRunning && row.Body.Status != store.JobRunRunning {
		s.outcome(row.Body)
	}
	return nil
}

// outcome tells Config.Outcome of a run's final status.
func (s *Scheduler) outcome(b store.JobRunBody) {
	if s.cfg.Outcome != nil {
		s.cfg.Outcome(b)
	}
}

// Stale reports whether a running run's Machine has not seen it alive
// for longer than stale (0: DefaultStale) at now: readers answer it lost.
func Stale(r store.JobRunBody, now time.Time, stale time.Duration) bool {
	if stale <= 0 {
		stale = DefaultStale
	}
	return r.Status == store.JobRunRunning && now.Sub(time.UnixMilli(r.Seen)) > stale
}

func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Failed reports whether a run's status is a failure an operator is
// shown: a non-zero exit or no start, lost, or missed. Skipped is not:
// the previous run still ran.
func Failed(status string) bool {
	switch status {
	case store.JobRunFailed, store.JobRunLost, store.JobRunMissed:
		return true
	}
	return false
}
