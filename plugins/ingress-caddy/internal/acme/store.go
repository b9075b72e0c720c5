package acme

import (
	"context"

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
