package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
)

// ContainerLister lists the containers table; serving processes (Internal
// DNS, the Ingress Proxy) take one so tests can hand them rows directly.
type ContainerLister interface {
	List(ctx context.Context) ([]Row[ContainerBody], error)
}

// TokenFileClient reaches a store API for the serving processes (Internal
// DNS, the Ingress Proxy and its ACME manager). On a Machine that is the
// store's unix socket, which takes no token (tokenFile empty). For a store
// reached over TCP the bearer token lives in a file that the store
// rewrites with a fresh token at every start (ployzd store --token-file);
// the file is read again after any failed request, so the new token is
// picked up without a restart. Safe for concurrent use.
type TokenFileClient struct {
	addr, tokenFile string
	mu              sync.Mutex
	c               *Client
}

// NewTokenFileClient returns a client for the API at addr (a socket path
// or host:port, see New); tokenFile may be empty when the API needs no
// token.
func NewTokenFileClient(addr, tokenFile string) *TokenFileClient {
	return &TokenFileClient{addr: addr, tokenFile: tokenFile}
}

// List implements ContainerLister.
func (s *TokenFileClient) List(ctx context.Context) ([]Row[ContainerBody], error) {
	var rows []Row[ContainerBody]
	err := s.Do(func(c *Client) (err error) {
		rows, err = c.Containers().List(ctx)
		return err
	})
	return rows, err
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
