package acme

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/ployz/ployz/core/store"
)

// Store is what a Manager reads and writes in the replicated store.
type Store interface {
	// Certificates lists the certificates table.
	Certificates(ctx context.Context) ([]store.Row[store.CertificateBody], error)
	// PutCertificate writes one certificates row (last writer wins).
	PutCertificate(ctx context.Context, r store.Row[store.CertificateBody]) error
	// Machines lists the machines table.
	Machines(ctx context.Context) ([]store.Row[store.MachineBody], error)
}

// TokenFileStore is a Store on a store API whose bearer token lives in a
// file, read again after a failed request (the daemon may rotate it).
type TokenFileStore struct {
	addr, tokenFile string
	mu              sync.Mutex
	c               *store.Client
}

// NewTokenFileStore returns a Store for the API at addr; tokenFile may be
// empty when the API needs no token.
func NewTokenFileStore(addr, tokenFile string) *TokenFileStore {
	return &TokenFileStore{addr: addr, tokenFile: tokenFile}
}

func (s *TokenFileStore) client() (*store.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	return s.c, nil
}

func (s *TokenFileStore) failed(err error) error {
	if err != nil {
		s.mu.Lock()
		s.c = nil
		s.mu.Unlock()
	}
	return err
}

// Certificates implements Store.
func (s *TokenFileStore) Certificates(ctx context.Context) ([]store.Row[store.CertificateBody], error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	rows, err := c.Certificates().List(ctx)
	return rows, s.failed(err)
}

// PutCertificate implements Store.
func (s *TokenFileStore) PutCertificate(ctx context.Context, r store.Row[store.CertificateBody]) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	_, err = c.Certificates().Put(ctx, r)
	return s.failed(err)
}

// Machines implements Store.
func (s *TokenFileStore) Machines(ctx context.Context) ([]store.Row[store.MachineBody], error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	rows, err := c.Machines().List(ctx)
	return rows, s.failed(err)
}
