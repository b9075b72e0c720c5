package volumecopy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
)

// FileName is the records' file in the daemon's data directory.
const FileName = "volume-copies.json"

// file is the document on disk; unknown fields are ignored on read.
type file struct {
	Volumes map[string]Copy `json:"volumes"`
}

// Store keeps this Machine's copies, written atomically on every change.
type Store struct {
	path string
	mu   sync.Mutex
	m    map[string]Copy
}

// Open reads path (a missing file is no copies).
func Open(path string) (*Store, error) {
	s := &Store{path: path, m: map[string]Copy{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("volume copies: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("volume copies %s: %w", path, err)
	}
	for k, v := range f.Volumes {
		s.m[k] = v
	}
	return s, nil
}

// Get is volume name's copy (the zero Copy, role none, when unrecorded).
func (s *Store) Get(name string) Copy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[name]
}

// All is a copy of every record.
func (s *Store) All() map[string]Copy {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Copy, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

// Set applies req through the transition table with facts read under the
// store's lock (so two requests for one volume are taken in turn) and
// persists a change before answering.
func (s *Store) Set(req rpc.SetVolumeCopyRequest, facts func() (Facts, error)) (Copy, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.m[req.Volume]
	f, err := facts()
	if err != nil {
		return cur, false, err
	}
	next, changed, err := Apply(cur, req, f, time.Now())
	if err != nil || !changed {
		return next, changed, err
	}
	if err := s.write(req.Volume, next); err != nil {
		return cur, false, err
	}
	return next, true, nil
}

// Created records a volume this Machine just provisioned as its Writer,
// unless it already has a role (create answers an existing volume).
func (s *Store) Created(name string) (Copy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.m[name]
	if cur.RoleOf() != None {
		return cur, nil
	}
	now := time.Now().UnixNano()
	next := cur
	next.Role, next.Epoch, next.Changed = Writer, max(now, cur.Epoch+1), now
	if err := s.write(name, next); err != nil {
		return cur, err
	}
	return next, nil
}

// Removed drops a destroyed volume's role and keeps its floor, so a late
// request from an older run stays refused if the name comes back.
func (s *Store) Removed(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[name]
	if !ok {
		return nil
	}
	return s.write(name, Copy{Floor: cur.Floor, Role: None, Changed: time.Now().UnixNano()})
}

// write sets name's record and persists all of them (lock held).
func (s *Store) write(name string, c Copy) error {
	m := make(map[string]Copy, len(s.m)+1)
	for k, v := range s.m {
		m[k] = v
	}
	m[name] = c
	b, err := json.MarshalIndent(file{Volumes: m}, "", "  ")
	if err != nil {
		return err
	}
	if err := machine.WriteFileAtomic(s.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("volume copies: %w", err)
	}
	s.m = m
	return nil
}
