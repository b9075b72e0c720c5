package volumecopy

import (
	"context"
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
//
// Two locks: mu guards only the map and the file and is never held
// across a call out (Get and All, which every Container start and volume
// answer reads, never wait behind a plugin or Docker); a volume's turn
// serialises the changes to that one volume (Set, Rollback, Admit,
// Created, Removed) with the facts they read, and is the one held across
// those calls. A rollback that once ran its plugin call under mu, then
// asked Get for its answer, waited on itself forever.
type Store struct {
	path  string
	mu    sync.Mutex
	m     map[string]Copy
	turns map[string]chan struct{} // one slot per volume, made on first use
}

// turn waits for volume's turn (its other changes ended) until ctx ends;
// release ends it. A wait cut by ctx names what was waited for.
func (s *Store) turn(ctx context.Context, volume string) (release func(), err error) {
	s.mu.Lock()
	if s.turns == nil {
		s.turns = map[string]chan struct{}{}
	}
	ch, ok := s.turns[volume]
	if !ok {
		// Kept after use: a Machine holds few volumes, and a slot removed
		// while another waits on it would let two changes run at once.
		ch = make(chan struct{}, 1)
		s.turns[volume] = ch
	}
	s.mu.Unlock()
	release = func() { <-ch }
	select {
	case ch <- struct{}{}: // free: taken even when ctx has ended
		return release, nil
	default:
	}
	select {
	case ch <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, rpc.Errorf(rpc.CodeUnavailable, "volume: another change to volume %q on this Machine (a role change, a Container task's admission or a rollback) has not ended: gave up waiting: %v",
			volume, context.Cause(ctx)).With("field", "volume")
	}
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

// Set applies req through the transition table with facts read in the
// volume's turn (so two requests for one volume are taken in turn) and
// persists a change before answering. It waits for the turn until ctx
// ends.
func (s *Store) Set(ctx context.Context, req rpc.SetVolumeCopyRequest, facts func() (Facts, error)) (Copy, bool, error) {
	release, err := s.turn(ctx, req.Volume)
	if err != nil {
		return s.Get(req.Volume), false, err
	}
	defer release()
	cur := s.Get(req.Volume)
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
	release, _ := s.turn(context.Background(), name)
	defer release()
	cur := s.Get(name)
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
	release, _ := s.turn(context.Background(), name)
	defer release()
	s.mu.Lock()
	cur, ok := s.m[name]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return s.write(name, Copy{Floor: cur.Floor, Role: None, Changed: time.Now().UnixNano()})
}

// write sets name's record and persists all of them (name's turn held;
// it takes mu itself).
func (s *Store) write(name string, c Copy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
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
