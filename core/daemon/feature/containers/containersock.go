package containers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// containerSock is what a per-Container socket shares, the readiness
// notify socket (readiness.go) and the activation socket (sockact.go)
// alike: a fresh directory under a root-only one, bind-mounted into the
// Container, the socket in it, and the Container it belongs to, known
// once created. A peer is answered only when placed inside that
// Container (notify_sender.go).
type containerSock struct {
	dir  string
	sock io.Closer
	mu   sync.Mutex
	id   string // the Container it belongs to; empty until created
}

func (s *containerSock) owner() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// setOwner makes s Container id's.
func (s *containerSock) setOwner(id string) {
	s.mu.Lock()
	s.id = id
	s.mu.Unlock()
}

func (s *containerSock) close() {
	s.sock.Close()
	os.RemoveAll(s.dir) // best effort: restore removes orphans
}

// inFreshDir binds a Container's socket in a new random directory under
// root, removing the directory when binding fails.
func inFreshDir[S any](root string, bind func(dir string) (S, error)) (S, error) {
	b := make([]byte, 8)
	rand.Read(b) // never fails
	dir := filepath.Join(root, hex.EncodeToString(b))
	s, err := bind(dir)
	if err != nil {
		os.RemoveAll(dir) // best effort: restore removes orphans
	}
	return s, err
}

// socketPath readies dir (under root, root-only) for the socket name:
// dir searchable by every user inside the Container (on the host, the
// root-only parent keeps it out of reach), a stale socket removed. what
// names the socket in errors.
func socketPath(root, dir, name, what string) (string, error) {
	if err := rootOnlyDir(root); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("%s directory: %w", what, err)
	}
	path := filepath.Join(dir, name)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return path, nil
}
