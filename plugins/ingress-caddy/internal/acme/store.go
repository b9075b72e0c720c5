package acme

import (
	"context"

	"github.com/ployz/ployz/sdk/store"
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
// file (store.TokenFileClient: read again after a failed request).
type TokenFileStore struct{ tf *store.TokenFileClient }

// NewTokenFileStore returns a Store for the API at addr; tokenFile may be
// empty when the API needs no token.
func NewTokenFileStore(addr, tokenFile string) TokenFileStore {
	return TokenFileStore{store.NewTokenFileClient(addr, tokenFile)}
}

// Certificates implements Store.
func (s TokenFileStore) Certificates(ctx context.Context) (rows []store.Row[store.CertificateBody], err error) {
	err = s.tf.Do(func(c *store.Client) error {
		rows, err = c.Certificates().List(ctx)
		return err
	})
	return rows, err
}

// PutCertificate implements Store.
func (s TokenFileStore) PutCertificate(ctx context.Context, r store.Row[store.CertificateBody]) error {
	return s.tf.Do(func(c *store.Client) error {
		_, err := c.Certificates().Put(ctx, r)
		return err
	})
}

// Machines implements Store.
func (s TokenFileStore) Machines(ctx context.Context) (rows []store.Row[store.MachineBody], err error) {
	err = s.tf.Do(func(c *store.Client) error {
		rows, err = c.Machines().List(ctx)
		return err
	})
	return rows, err
}
