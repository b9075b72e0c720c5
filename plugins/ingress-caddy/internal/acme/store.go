package acme

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/sdk/store"
)

// Store is what a Manager reads and writes in the replicated store: a
// part of store.Reader and store.Writer, which store.TokenFileClient
// serves.
type Store interface {
	// Certificates lists the certificates table.
	Certificates(ctx context.Context) ([]store.Row[store.CertificateBody], error)
	// PutCertificate writes one certificates row (last writer wins).
	PutCertificate(ctx context.Context, r store.Row[store.CertificateBody]) error
	// Machines lists the machines table.
	Machines(ctx context.Context) ([]store.Row[store.MachineBody], error)
}

// Watcher is a Store that tells when what the Manager reads may have
// changed, so the Manager reads it then instead of every Interval.
type Watcher interface {
	// Watch follows the Manager's reads until ctx ends (store.Watch).
	Watch(ctx context.Context, log hclog.Logger) *store.Watch
}

// WatchQueries are the store subscriptions that follow what a Manager
// reads: the certificates rows, and exactly the fields of a Machine row
// that rank it or decide sealing (its heartbeat and others wake nothing).
var WatchQueries = []string{
	`SELECT name, body, updated_at FROM certificates`,
	`SELECT id, json_extract(body, '$.phase'), json_extract(body, '$.labels'), json_extract(body, '$.capabilities') FROM machines`,
}

// TokenFileStore is the real Store: the replicated store through a
// token-file client, followed by subscription.
type TokenFileStore struct{ *store.TokenFileClient }

// Watch implements Watcher.
func (s TokenFileStore) Watch(ctx context.Context, log hclog.Logger) *store.Watch {
	return store.NewWatch(ctx, s.Do, WatchQueries, log)
}

var (
	_ Store   = TokenFileStore{}
	_ Watcher = TokenFileStore{}
)
