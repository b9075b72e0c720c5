// Package operator is the operator's store: the CLI's own SQLite file
// holding contexts (how to reach a Cluster) and allocation history (which
// subnet the operator gave which Machine). It is the operator's
// bookkeeping, never runtime truth (docs/architecture.md bet 6): the history is saved
// before a subnet is published or joined and kept after failures, so a
// retried enrollment resumes with the same subnet.
package operator

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Store is an open operator store.
type Store struct {
	db *sql.DB
}

// EnvPath overrides the store's location.
const EnvPath = "PLOYZ_OPERATOR_STORE"

// DefaultPath is $PLOYZ_OPERATOR_STORE, else $XDG_CONFIG_HOME/ployz/operator.db.
func DefaultPath() string {
	if p := os.Getenv(EnvPath); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = "."
	}
	return filepath.Join(dir, "ployz", "operator.db")
}

const schema = `
CREATE TABLE IF NOT EXISTS contexts (
  name       TEXT PRIMARY KEY NOT NULL,
  network    TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE IF NOT EXISTS connections (
  context  TEXT NOT NULL,
  position INTEGER NOT NULL,
  url      TEXT NOT NULL,
  ssh_key  TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (context, position)
);
CREATE TABLE IF NOT EXISTS settings (
  key   TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS allocations (
  context      TEXT NOT NULL,
  machine_id   TEXT NOT NULL,
  machine_name TEXT NOT NULL DEFAULT '',
  subnet       TEXT NOT NULL,
  state        TEXT NOT NULL DEFAULT 'allocated',
  created_at   TEXT NOT NULL DEFAULT (datetime('now')),
  updated_at   TEXT NOT NULL DEFAULT (datetime('now')),
  PRIMARY KEY (context, machine_id)
);
`

// Open opens (creating when missing) the operator store at path.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("operator store: %w", err)
	}
	if err := ownerOnly(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, fmt.Errorf("operator store %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("operator store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// ownerOnly creates the store file 0600, or narrows an existing one to
// 0600, before SQLite opens it: SQLite would create it with the umask's
// mode (0644) in a directory that already exists, and gives its WAL and
// shared-memory files the database file's mode.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return fmt.Errorf("operator store %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("operator store %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := f.Chmod(0o600); err != nil {
			return fmt.Errorf("operator store %s: %w", path, err)
		}
	}
	return nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// ErrNoContext means no context is selected or the named one is missing.
var ErrNoContext = errors.New("no such context")
