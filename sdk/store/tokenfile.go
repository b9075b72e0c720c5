package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Reader is what a plugin reads from the store: the tables a plugin may
// read and the store's membership view. TokenFileClient implements it; a
// test hands a plugin its rows through its own.
type Reader interface {
	// Machines lists the machines table.
	Machines(ctx context.Context) ([]Row[MachineBody], error)
	// Containers lists the containers table.
	Containers(ctx context.Context) ([]Row[ContainerBody], error)
	// ServingPointers lists the serving table (Serving Pointers).
	ServingPointers(ctx context.Context) ([]Row[ServingBody], error)
	// Certificates lists the certificates table.
	Certificates(ctx context.Context) ([]Row[CertificateBody], error)
	// Membership reads the store's view of which members are down
	// (ErrNoMembership when the store has none).
	Membership(ctx context.Context) (Membership, error)
}

// Writer writes the rows a plugin owns: certificates (shared by every
// Machine's ingress, last writer wins) and its own Machine's serving_acks
// row.
type Writer interface {
	PutCertificate(ctx context.Context, r Row[CertificateBody]) error
	PutServingAck(ctx context.Context, r Row[ServingAckBody]) error
}

// TokenFileClient reaches a store API for a plugin (Internal DNS, the
// Ingress Proxy and its ACME manager). On a Machine that is the store's
// unix socket, which takes no token (tokenFile empty). For a store reached
// over TCP the bearer token lives in a file that the store rewrites with a
// fresh token at every start (ployzd store --token-file); the file is read
// again after any failed request, so the new token is picked up without a
// restart. It is a Reader and a Writer. Safe for concurrent use.
type TokenFileClient struct {
	addr, tokenFile string
	mu              sync.Mutex
	c               *Client
}

var (
	_ Reader = (*TokenFileClient)(nil)
	_ Writer = (*TokenFileClient)(nil)
)

// NewTokenFileClient returns a client for the API at addr (a socket path
// or host:port, see New); tokenFile may be empty when the API needs no
// token.
func NewTokenFileClient(addr, tokenFile string) *TokenFileClient {
	return &TokenFileClient{addr: addr, tokenFile: tokenFile}
}

// Machines implements Reader.
func (s *TokenFileClient) Machines(ctx context.Context) ([]Row[MachineBody], error) {
	return listVia(ctx, s, (*Client).Machines)
}

// Containers implements Reader.
func (s *TokenFileClient) Containers(ctx context.Context) ([]Row[ContainerBody], error) {
	return listVia(ctx, s, (*Client).Containers)
}

// ServingPointers implements Reader.
func (s *TokenFileClient) ServingPointers(ctx context.Context) ([]Row[ServingBody], error) {
	return listVia(ctx, s, (*Client).Serving)
}

// Certificates implements Reader.
func (s *TokenFileClient) Certificates(ctx context.Context) ([]Row[CertificateBody], error) {
	return listVia(ctx, s, (*Client).Certificates)
}

// Membership implements Reader. A store without a membership view is no
// failure of the client: it is kept (a reader asks every poll).
func (s *TokenFileClient) Membership(ctx context.Context) (m Membership, err error) {
	none := false
	err = s.Do(func(c *Client) (err error) {
		m, err = c.Membership(ctx)
		if errors.Is(err, ErrNoMembership) {
			none = true
			return nil
		}
		return err
	})
	if none {
		return m, ErrNoMembership
	}
	return m, err
}

// PutCertificate implements Writer.
func (s *TokenFileClient) PutCertificate(ctx context.Context, r Row[CertificateBody]) error {
	return putVia(ctx, s, (*Client).Certificates, r)
}

// PutServingAck implements Writer.
func (s *TokenFileClient) PutServingAck(ctx context.Context, r Row[ServingAckBody]) error {
	return putVia(ctx, s, (*Client).ServingAcks, r)
}

// listVia lists one table through s.
func listVia[B any](ctx context.Context, s *TokenFileClient, table func(*Client) Table[B]) (rows []Row[B], err error) {
	err = s.Do(func(c *Client) (err error) {
		rows, err = table(c).List(ctx)
		return err
	})
	return rows, err
}

// putVia writes one row of one table through s.
func putVia[B any](ctx context.Context, s *TokenFileClient, table func(*Client) Table[B], r Row[B]) error {
	return s.Do(func(c *Client) error {
		_, err := table(c).Put(ctx, r)
		return err
	})
}

// Do runs f with a client carrying the token file's token; a failure
// drops the client, so the next call reads the token file again.
func (s *TokenFileClient) Do(f func(*Client) error) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	if err := f(c); err != nil {
		s.mu.Lock()
		if s.c == c {
			s.c = nil
		}
		s.mu.Unlock()
		return err
	}
	return nil
}

func (s *TokenFileClient) client() (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		var opts []Option
		if s.tokenFile != "" {
			b, err := os.ReadFile(s.tokenFile)
			if err != nil {
				return nil, fmt.Errorf("store_token_file: %w", err)
			}
			opts = append(opts, WithToken(strings.TrimSpace(string(b))))
		}
		s.c = New(s.addr, opts...)
	}
	return s.c, nil
}
