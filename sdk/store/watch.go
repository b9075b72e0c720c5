package store

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Watch backoff: a subscription that cannot be opened is tried again
// after watchMinBackoff, doubling up to watchMaxBackoff.
const (
	watchMinBackoff = 250 * time.Millisecond
	watchMaxBackoff = 5 * time.Second
)

// A Watch tells a reader of some tables when to read them again, so it
// follows the store by subscription instead of polling it often: C
// receives (coalesced) after any change to the rows its queries select,
// and once whenever a subscription is (re)established, since changes may
// have been missed meanwhile. A query should select exactly the columns
// the reader uses, so unrelated writes wake nothing.
type Watch struct {
	// C receives after a change; it is never closed.
	C    <-chan struct{}
	c    chan struct{}
	down atomic.Int32 // subscriptions not open right now
}

// NewWatch opens one subscription (changes only) per query through do,
// until ctx ends. A subscription resumes on its own after a disconnect;
// one that ends (the store restarted and forgot it, or refused it) is
// opened again with backoff. do runs f with a client (a TokenFileClient's
// Do, or a function calling f with a fixed Client).
func NewWatch(ctx context.Context, do func(f func(*Client) error) error, queries []string, log hclog.Logger) *Watch {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	c := make(chan struct{}, 1)
	w := &Watch{C: c, c: c}
	w.down.Store(int32(len(queries)))
	for _, q := range queries {
		go w.follow(ctx, do, q, log)
	}
	return w
}

// Live reports whether every subscription is open: while one is not, a
// reader should poll.
func (w *Watch) Live() bool { return w.down.Load() == 0 }

// Wake wakes the reader as a change of the tables would: for a follower
// of something else the reader's input depends on (a file).
func (w *Watch) Wake() { w.wake() }

func (w *Watch) wake() {
	select {
	case w.c <- struct{}{}:
	default: // a read is pending already
	}
}

// follow keeps one query's subscription open until ctx ends.
func (w *Watch) follow(ctx context.Context, do func(f func(*Client) error) error, q string, log hclog.Logger) {
	backoff := watchMinBackoff
	for ctx.Err() == nil {
		var sub *Subscription
		err := do(func(c *Client) (err error) {
			sub, err = c.Subscribe(ctx, Stmt(q), SubscribeOptions{SkipRows: true, Log: log})
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("store subscription failed; retrying", "query", q, "error", err, "in", backoff)
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, watchMaxBackoff)
			continue
		}
		backoff = watchMinBackoff
		w.down.Add(-1)
		w.wake() // changes before the subscription started are unseen
		for ev := range sub.Events {
			if ev.Kind == EventChange {
				w.wake()
			}
		}
		w.down.Add(1)
		if err := sub.Err(); err != nil && ctx.Err() == nil {
			log.Warn("store subscription ended; subscribing again", "query", q, "error", err)
		}
		sub.Close()
	}
}
