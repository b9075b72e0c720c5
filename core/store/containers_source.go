package store

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// ContainerLister lists the containers table; serving processes (Internal
// DNS, the Ingress Proxy) take one so tests can hand them rows directly.
type ContainerLister interface {
	List(ctx context.Context) ([]Row[ContainerBody], error)
}

// TokenFileContainers lists the containers table from a store API whose
// bearer token lives in a file. The file is read again after any failed
// request, so a token rotated by the daemon is picked up without a restart.
type TokenFileContainers struct {
	addr, tokenFile string
	c               *Client
}

// NewTokenFileContainers returns a lister for the API at addr; tokenFile
// may be empty when the API needs no token.
func NewTokenFileContainers(addr, tokenFile string) *TokenFileContainers {
	return &TokenFileContainers{addr: addr, tokenFile: tokenFile}
}

// List implements ContainerLister.
func (s *TokenFileContainers) List(ctx context.Context) ([]Row[ContainerBody], error) {
	var rows []Row[ContainerBody]
	err := s.Do(func(c *Client) (err error) {
		rows, err = c.Containers().List(ctx)
		return err
	})
	return rows, err
}

// Do runs f with a client carrying the token file's token; a failure
// drops the client, so the next call reads the token file again.
func (s *TokenFileContainers) Do(f func(*Client) error) error {
	if s.c == nil {
		var opts []Option
		if s.tokenFile != "" {
			b, err := os.ReadFile(s.tokenFile)
			if err != nil {
				return fmt.Errorf("store_token_file: %w", err)
			}
			opts = append(opts, WithToken(strings.TrimSpace(string(b))))
		}
		s.c = New(s.addr, opts...)
	}
	if err := f(s.c); err != nil {
		s.c = nil
		return err
	}
	return nil
}
