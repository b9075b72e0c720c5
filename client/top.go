package client

import (
	"context"
	"time"

	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// TopSample is one refresh of `top`: when it was taken, every
// Container's latest CPU and memory (busiest first), the Machines that
// did not answer, or the error of the whole refresh.
type TopSample struct {
	At     time.Time
	Rows   []observe.TopRow
	Failed []observe.Failure
	Err    error
}

// Top asks the Machines t names for every Container's latest CPU and
// memory once: the rows busiest first and the Machines that did not
// answer, which also make a *PartialError beside the rows.
func (s *Session) Top(ctx context.Context, t rpc.Target) ([]observe.TopRow, []observe.Failure, error) {
	rows, ms, err := observe.Top(ctx, s.ent, t)
	if err != nil {
		return nil, nil, err
	}
	return rows, observe.Failed(ms), MetricsPartial(ms)
}

// WatchTop samples the Machines t names at once and then on each tick,
// each refresh cut off after timeout (so a Machine that hangs is named
// instead of freezing the view), and hands every sample to emit until
// ctx ends.
func (s *Session) WatchTop(ctx context.Context, t rpc.Target, ticks <-chan time.Time, timeout time.Duration, emit func(TopSample)) {
	topWatch{timeout: timeout, now: time.Now, emit: emit,
		fetch: func(ctx context.Context) ([]observe.TopRow, []observe.Failure, error) {
			rows, ms, err := observe.Top(ctx, s.ent, t)
			return rows, observe.Failed(ms), err
		}}.run(ctx, ticks)
}

// topWatch is WatchTop's loop; its parts are fields so a test drives it
// with a fake Cluster and clock.
type topWatch struct {
	timeout time.Duration // of one fetch
	fetch   func(ctx context.Context) ([]observe.TopRow, []observe.Failure, error)
	now     func() time.Time
	emit    func(TopSample)
}

// run samples at once, then once per tick, and returns when ctx ends.
func (w topWatch) run(ctx context.Context, ticks <-chan time.Time) {
	for {
		fctx, cancel := context.WithTimeout(ctx, w.timeout)
		rows, failed, err := w.fetch(fctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		w.emit(TopSample{At: w.now(), Rows: rows, Failed: failed, Err: err})
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
	}
}
