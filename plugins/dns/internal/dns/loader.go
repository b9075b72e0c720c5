package dns

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	dnsspec "github.com/ployz/ployz/sdk/dns"
	"github.com/ployz/ployz/sdk/serving"

	"github.com/ployz/ployz/sdk/store"
)

// Loader timing. With live subscriptions the Table is rebuilt on every
// change of the tables it reads, and re-read every SafetyInterval in case
// a change was missed; while one is not open (the store refused or
// dropped it; it is opened again on its own) the loader polls every
// PollInterval. Failed reads back off from 250 ms to 2 s while the last
// Table keeps answering.
const (
	PollInterval   = 500 * time.Millisecond
	SafetyInterval = 10 * time.Second
	minBackoff     = 250 * time.Millisecond
	maxBackoff     = 2 * time.Second
)

// Source is what Internal DNS reads: the containers, serving and machines
// tables, and notice of their changes.
type Source interface {
	// Read returns the tables' rows as the Serving Pointer computation
	// takes them (Containers, Pointers, Machines).
	Read(ctx context.Context) (serving.Input, error)
	// Watch follows those tables until ctx ends.
	Watch(ctx context.Context, log hclog.Logger) *store.Watch
}

// StoreSource reads the replicated store at the spec's store_api, with
// the token from its store_token_file, and watches it by subscription.
// Container addresses outside the spec's Cluster network are refused.
// So are those whose owner ployzd's trust list (trusted_machines_file)
// does not hold with the subnet the store says.
type StoreSource struct {
	tf     *store.TokenFileClient
	bounds serving.Bounds
}

// NewStoreSource returns the store Source of cfg.
func NewStoreSource(cfg dnsspec.Config) StoreSource {
	return StoreSource{store.NewTokenFileClient(cfg.StoreAPI, cfg.StoreTokenFile),
		serving.Bounds{Network: cfg.NetworkPrefix, TrustedFile: cfg.TrustedMachinesFile}}
}

// Read implements Source.
func (s StoreSource) Read(ctx context.Context) (serving.Input, error) {
	return serving.Read(ctx, s.tf, s.bounds)
}

// Watch implements Source: serving.Watch of what Read reads (the tables,
// the membership view and the trust list).
func (s StoreSource) Watch(ctx context.Context, log hclog.Logger) *store.Watch {
	return serving.Watch(ctx, s.tf.Do, s.bounds.TrustedFile, log)
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
		ages    serving.Ages
		refusal refusalLog
		backoff = minBackoff
		failing bool
	)
	// Subscribe before reading, so no change falls between the two.
	w := src.Watch(ctx, log)
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		in, err := src.Read(lctx)
		cancel()
		wait := poll
		if w.Live() {
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
			refusal.report(log, t.Refused())
			serving.SetRefused(len(t.Refused()))
			if failing || first {
				log.Info("loaded from the store", "containers", len(in.Containers), "pointers", len(in.Pointers), "names", t.Len(),
					"refused", len(t.Refused()), "subscribed", w.Live())
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
		case <-w.C:
		}
		timer.Stop()
	}
}

// refusalLog warns once per Container row that is refused (and again if
// the reason changes), not on every load: a forged row must neither
// serve nor flood the log. A row no longer refused is forgotten.
type refusalLog struct{ seen map[string]string }

func (l *refusalLog) report(log hclog.Logger, rs []Refusal) {
	next := make(map[string]string, len(rs))
	for _, r := range rs {
		next[r.Key] = r.Reason
		if old, ok := l.seen[r.Key]; !ok || old != r.Reason {
			log.Warn("not answering a Container whose address its Machine cannot vouch for",
				"container", r.Key, "owner", r.Owner, "ip", r.IP, "reason", r.Reason)
		}
	}
	l.seen = next
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
