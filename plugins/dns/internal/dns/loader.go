package dns

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	dnsspec "github.com/ployz/ployz/sdk/dns"

	"github.com/ployz/ployz/core/store"
)

// Loader timing: a successful load repeats every PollInterval; failures
// back off from 250 ms to 2 s while the last Table keeps answering.
const (
	PollInterval = 500 * time.Millisecond
	minBackoff   = 250 * time.Millisecond
	maxBackoff   = 2 * time.Second
)

// ContainerSource lists the Containers table.
type ContainerSource = store.ContainerLister

// NewStoreSource reads the Containers table from the spec's store_api,
// with the token from its store_token_file.
func NewStoreSource(cfg dnsspec.Config) *store.TokenFileClient {
	return store.NewTokenFileClient(cfg.StoreAPI, cfg.StoreTokenFile)
}

// Load keeps h's Table current from src until ctx ends. The first
// successful load starts answering (and calls onFirst); a failed load
// keeps the last Table.
func Load(ctx context.Context, h *Handler, src ContainerSource, interval time.Duration, log hclog.Logger, onFirst func()) {
	if interval <= 0 {
		interval = PollInterval
	}
	backoff := minBackoff
	failing := false
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rows, err := src.List(lctx)
		cancel()
		wait := interval
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
			t := NewTable(rows)
			h.SetTable(t)
			if failing || first {
				log.Info("loaded from the store", "containers", len(rows), "names", t.Len())
			}
			failing, backoff = false, minBackoff
			if first && onFirst != nil {
				onFirst()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}
