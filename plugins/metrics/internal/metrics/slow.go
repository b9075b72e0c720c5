package metrics

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Slow runs a source that can block (a directory walk, `zfs list`) on its
// own tick with a timeout, so the 10 s loop only ever reads its last
// result: a slow source drops its metric (a named gap), it never stalls
// sampling.
type Slow struct {
	Every   time.Duration
	Timeout time.Duration
	Read    func(context.Context) (float64, error)

	mu  sync.Mutex
	v   float64
	err error
	at  time.Time
}

// errNotYet is the gap before the first reading.
var errNotYet = errors.New("not read yet")

// Run reads every Every until ctx ends.
func (s *Slow) Run(ctx context.Context) {
	for {
		rctx, cancel := context.WithTimeout(ctx, s.Timeout)
		type result struct {
			v   float64
			err error
		}
		done := make(chan result, 1) // a reader that times out still finishes into it
		go func() { v, err := s.Read(rctx); done <- result{v, err} }()
		var v float64
		var err error
		select {
		case r := <-done:
			v, err = r.v, r.err
		case <-rctx.Done():
			v, err = 0, errors.New("source timed out after "+s.Timeout.String())
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.v, s.err, s.at = v, err, time.Now()
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.Every):
		}
	}
}

// Last is the last reading, or why there is none.
func (s *Slow) Last() (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() {
		return 0, errNotYet
	}
	return s.v, s.err
}
