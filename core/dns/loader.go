package dns

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

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
type ContainerSource interface {
	List(ctx context.Context) ([]store.Row[store.ContainerBody], error)
}

// StoreSource reads the Containers table from the store API named by a
// spec, re-reading the token file whenever a request fails.
type StoreSource struct {
	addr, tokenFile string
	c               *store.Client
}

// NewStoreSource returns a source for cfg's store_api and store_token_file.
func NewStoreSource(cfg Config) *StoreSource {
	return &StoreSource{addr: cfg.StoreAPI, tokenFile: cfg.StoreTokenFile}
}

// List implements ContainerSource.
func (s *StoreSource) List(ctx context.Context) ([]store.Row[store.ContainerBody], error) {
	if s.c == nil {
		var opts []store.Option
		if s.tokenFile != "" {
			b, err := os.ReadFile(s.tokenFile)
			if err != nil {
				return nil, fmt.Errorf("store_token_file: %w", err)
			}
			opts = append(opts, store.WithToken(strings.TrimSpace(string(b))))
		}
		s.c = store.New(s.addr, opts...)
	}
	rows, err := s.c.Containers().List(ctx)
	if err != nil {
		s.c = nil
		return nil, err
	}
	return rows, nil
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
