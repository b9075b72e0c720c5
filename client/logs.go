package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// LogFollow is what FollowLogs follows.
type LogFollow struct {
	Query rpc.LogQuery
	// Machine limits it to one Machine (name, id or an id prefix of 4+).
	Machine string
	// Tail is how many stored lines each Machine sends first (<0: 10).
	Tail int
	// Reopen reopens a broken stream with backoff instead of giving the
	// Machine up (a dashboard that stays open).
	Reopen bool
}

// LogEvent is one followed line, or news of one Machine's stream: it
// failed for good (Err, not Down), is down until a reopen in Retry
// (Down), or was reopened (Up).
type LogEvent struct {
	Line    *observe.Line
	Machine string
	Err     error
	Down    bool
	Up      bool
	Retry   time.Duration
}

// Reopen backoff of a broken log stream: doubling from the first, capped.
// A reopened stream asks for the last logReopenTail lines and sends on
// those newer than the last it sent.
const (
	logReopenFirst = time.Second
	logReopenMax   = 30 * time.Second
	logReopenTail  = 500
)

// FollowLogs opens tail_logs on every Machine (or f.Machine) and emits
// lines as they are stored, until ctx ends; emit is never called at once
// from two Machines. Without Reopen a Machine whose stream cannot open or
// breaks is given up, and any given up returns a *PartialError.
func (s *Session) FollowLogs(ctx context.Context, f LogFollow, emit func(LogEvent)) error {
	var list rpc.MachineList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListMachines, rpc.None{}, &list); err != nil {
		return fmt.Errorf("logs: list machines: %w", err)
	}
	if f.Tail < 0 {
		f.Tail = 10
	}
	if f.Tail > rpc.MaxLogLimit {
		return fmt.Errorf("--tail %d exceeds %d", f.Tail, rpc.MaxLogLimit)
	}
	lf := &logFollower{ent: s.ent, f: f, emit: emit}
	var wg sync.WaitGroup
	matched := 0
	for _, m := range list.Machines {
		if f.Machine != "" && f.Machine != m.Name && f.Machine != m.ID && !(len(f.Machine) >= 4 && strings.HasPrefix(m.ID, f.Machine)) {
			continue
		}
		matched++
		name := m.Name
		if name == "" {
			name = m.ID
		}
		wg.Go(func() { lf.follow(ctx, m.ID, name) })
	}
	if matched == 0 && f.Machine != "" {
		return fmt.Errorf("--machine %s: no such Machine", f.Machine)
	}
	wg.Wait()
	if len(lf.broken) > 0 && ctx.Err() == nil {
		return partial(fmt.Errorf("logs could not be followed on %s", strings.Join(lf.broken, ", ")))
	}
	return nil
}

// logFollower follows one Service's logs on each Machine, one goroutine
// per Machine.
type logFollower struct {
	ent    *rpc.Client
	f      LogFollow
	mu     sync.Mutex // emit and broken
	emit   func(LogEvent)
	broken []string
}

func (lf *logFollower) send(e LogEvent) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if e.Err != nil && !e.Down {
		lf.broken = append(lf.broken, e.Machine)
	}
	lf.emit(e)
}

// follow streams one Machine's lines; with Reopen it opens the stream
// again after a break, asking for recent lines and sending only those
// newer than the last one sent.
func (lf *logFollower) follow(ctx context.Context, id, name string) {
	var last int64
	wait := logReopenFirst
	for attempt := 1; ; attempt++ {
		began := time.Now()
		opened, err := lf.stream(ctx, id, name, &last, attempt > 1)
		if ctx.Err() != nil {
			return
		}
		if opened && time.Since(began) > logReopenMax {
			wait = logReopenFirst // it worked for a while: start the backoff over
		}
		if !lf.f.Reopen {
			lf.send(LogEvent{Machine: name, Err: err})
			return
		}
		lf.send(LogEvent{Machine: name, Err: err, Down: true, Retry: wait})
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, logReopenMax)
	}
}

// stream runs one tail_logs stream until it ends; opened says whether it
// opened, err why it ended.
func (lf *logFollower) stream(ctx context.Context, id, name string, last *int64, again bool) (bool, error) {
	tail := lf.f.Tail
	if again {
		tail = logReopenTail // what was stored while the stream was down, deduplicated below
	}
	st, err := rpc.Open(ctx, lf.ent, rpc.Target{One: id}, rpc.TailLogs, rpc.TailLogsRequest{LogQuery: lf.f.Query, Tail: tail, Follow: true})
	if err != nil {
		return false, err
	}
	defer st.Close()
	if again {
		lf.send(LogEvent{Machine: name, Up: true})
	}
	for {
		fr, err := st.Recv()
		if err != nil {
			return true, fmt.Errorf("log stream ended: %w", err)
		}
		if fr.Done {
			return true, errors.New("log stream ended")
		}
		r, err := rpc.TailLogs.Event(fr)
		if err != nil || again && r.Time <= *last {
			continue
		}
		*last = max(*last, r.Time)
		lf.send(LogEvent{Machine: name, Line: &observe.Line{Machine: name, LogRecord: r}})
	}
}
