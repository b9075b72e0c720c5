package dns

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	dnsspec "github.com/ployz/ployz/sdk/dns"
	"github.com/ployz/ployz/sdk/serving"

	"github.com/ployz/ployz/core/store"
)

// Loader timing. With a live subscription the Table is rebuilt on every
// change of the tables it reads, and re-read every SafetyInterval in case
// a change was missed; without one (the store refused or dropped it) the
// loader polls every PollInterval and subscribes again after
// resubscribeAfter. Failed reads back off from 250 ms to 2 s while the
// last Table keeps answering.
const (
	PollInterval     = 500 * time.Millisecond
	SafetyInterval   = 10 * time.Second
	resubscribeAfter = 5 * time.Second
	minBackoff       = 250 * time.Millisecond
	maxBackoff       = 2 * time.Second
)

// Source is what Internal DNS reads: the containers, serving and machines
// tables, and notice of their changes.
type Source interface {
	// Read returns the tables' rows as the Serving Pointer computation
	// takes them (Containers, Pointers, Sessions).
	Read(ctx context.Context) (serving.Input, error)
	// Watch returns a channel that receives after any change to those
	// tables. It is closed when the watch fails; ctx ends it.
	Watch(ctx context.Context) (<-chan struct{}, error)
}

// StoreSource reads the replicated store at the spec's store_api, with
// the token from its store_token_file, and watches it by subscription.
type StoreSource struct{ tf *store.TokenFileClient }

// NewStoreSource returns the store Source of cfg.
func NewStoreSource(cfg dnsspec.Config) StoreSource {
	return StoreSource{store.NewTokenFileClient(cfg.StoreAPI, cfg.StoreTokenFile)}
}

// watched are the tables Read reads, as subscription statements.
var watched = []string{
	"SELECT id, owner, body, updated_at FROM containers",
	"SELECT id, owner, body, updated_at FROM serving",
	"SELECT id, owner, body, updated_at FROM machines",
}

// Read implements Source.
func (s StoreSource) Read(ctx context.Context) (in serving.Input, err error) {
	err = s.tf.Do(func(c *store.Client) error {
		in, err = serving.Read(ctx, c)
		return err
	})
	return in, err
}

// Watch implements Source with one subscription per table (changes
// only). The subscriptions resume on their own across store restarts;
// when one gives up, the channel closes.
func (s StoreSource) Watch(ctx context.Context) (<-chan struct{}, error) {
	ctx, cancel := context.WithCancel(ctx)
	var subs []*store.Subscription
	for _, q := range watched {
		var sub *store.Subscription
		err := s.tf.Do(func(c *store.Client) (err error) {
			sub, err = c.Subscribe(ctx, store.Stmt(q), store.SubscribeOptions{SkipRows: true})
			return err
		})
		if err != nil {
			cancel()
			for _, s := range subs {
				s.Close()
			}
			return nil, err
		}
		subs = append(subs, sub)
	}
	ch := make(chan struct{}, 1)
	ended := make(chan struct{}, len(subs))
	for _, sub := range subs {
		go func() {
			defer func() { ended <- struct{}{} }()
			for ev := range sub.Events {
				if ev.Kind == store.EventChange {
					select {
					case ch <- struct{}{}:
					default: // a reload is pending already
					}
				}
			}
		}()
	}
	go func() {
		<-ended // the first to end ends the watch
		cancel()
		for _, s := range subs {
			s.Close()
		}
		close(ch)
	}()
	return ch, nil
}

// Load keeps h's Table current from src until ctx ends. The first
// successful read starts answering (and calls onFirst); a failed read
// keeps the last Table. poll is the interval without a subscription
// (default PollInterval).
func Load(ctx context.Context, h *Handler, src Source, poll time.Duration, log hclog.Logger, onFirst func()) {
	if poll <= 0 {
		poll = PollInterval
	}
	var (
		ages      serving.Ages
		backoff   = minBackoff
		failing   bool
		changes   <-chan struct{}
		nextWatch time.Time
		watchErr  string
	)
	for ctx.Err() == nil {
		// Subscribe before reading, so no change falls between the two.
		if changes == nil && !time.Now().Before(nextWatch) {
			ch, err := src.Watch(ctx)
			switch {
			case err == nil:
				changes = ch
				if watchErr != "" {
					log.Info("following the store by subscription again")
				}
				watchErr = ""
			case ctx.Err() != nil:
				return
			default:
				if err.Error() != watchErr && !errors.Is(err, context.Canceled) {
					log.Warn("cannot subscribe to the store; polling", "interval", poll, "error", err)
				}
				watchErr = err.Error()
				nextWatch = time.Now().Add(resubscribeAfter)
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		in, err := src.Read(lctx)
		cancel()
		wait := poll
		if changes != nil {
			wait = SafetyInterval
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				log.Warn("store unreachable; keeping the last answers", "loaded", h.Loaded(), "error", err)
			}
			failing = true
			wait, backoff = backoff, min(backoff*2, maxBackoff)
		} else {
			first := !h.Loaded()
			if old := h.table.Load(); old != nil {
				in.Prev = old.Sets()
			}
			in.Young = ages.Young(in.Pointers, time.Now())
			t := Build(in)
			h.SetTable(t)
			if failing || first {
				log.Info("loaded from the store", "containers", len(in.Containers), "pointers", len(in.Pointers), "names", t.Len(), "subscribed", changes != nil)
			}
			failing, backoff = false, minBackoff
			if first && onFirst != nil {
				onFirst()
			}
			if held(t) {
				wait = min(wait, time.Second) // a young pointer's hold ends by time, not by a change
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-timer.C:
		case _, ok := <-changes:
			if !ok {
				changes = nil // the watch ended: poll until it is back
				log.Warn("store subscription ended; polling until it is back", "interval", poll)
				nextWatch = time.Now().Add(minBackoff)
			}
		}
		timer.Stop()
	}
}

// held reports whether any Service answers a held (previous) set.
func held(t *Table) bool {
	for _, s := range t.Sets() {
		if s.Held {
			return true
		}
	}
	return false
}
