package proxy

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/store"
)

// Watcher is a Source that tells when its input may have changed, so
// Serve reads it then instead of polling often.
type Watcher interface {
	// Watch returns a channel that receives (coalesced) after any change
	// to what Input reads, until ctx ends; it also receives whenever the
	// watch itself was (re)established, since changes may have been missed.
	Watch(ctx context.Context, log hclog.Logger) <-chan struct{}
}

// SafetyPoll is how often Serve reads a Watcher's input with no change
// reported: a net under the subscriptions, not the way changes arrive.
const SafetyPoll = 10 * time.Second

// watchQueries are the store subscriptions the proxy follows: exactly
// the columns Input uses, so unrelated writes (a Machine's heartbeat
// fields) wake nothing.
var watchQueries = []string{
	`SELECT id, owner, body FROM containers`,
	`SELECT id, body FROM serving`,
	`SELECT id, json_extract(body, '$.session') FROM machines`,
}

// Watch implements Watcher with one store subscription per table Input
// reads. A subscription resumes on its own after a disconnect; one that
// ends (e.g. the store restarted and forgot it) is opened again.
func (s StoreSource) Watch(ctx context.Context, log hclog.Logger) <-chan struct{} {
	ch := make(chan struct{}, 1)
	wake := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	for _, q := range watchQueries {
		go s.follow(ctx, q, wake, log)
	}
	return ch
}

func (s StoreSource) follow(ctx context.Context, q string, wake func(), log hclog.Logger) {
	backoff := minBackoff
	for ctx.Err() == nil {
		var sub *store.Subscription
		err := s.tf.Do(func(c *store.Client) (err error) {
			sub, err = c.Subscribe(ctx, store.Stmt(q), store.SubscribeOptions{SkipRows: true})
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
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		backoff = minBackoff
		wake() // changes before the subscription started are unseen
		for ev := range sub.Events {
			if ev.Kind == store.EventChange {
				wake()
			}
		}
		if err := sub.Err(); err != nil && ctx.Err() == nil {
			log.Warn("store subscription ended; subscribing again", "query", q, "error", err)
		}
		sub.Close()
	}
}

var _ Watcher = StoreSource{}
