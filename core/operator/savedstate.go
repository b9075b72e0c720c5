package operator

import (
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SavedState is one revision of a project's declaration in one
// environment: the compose file exactly as deployed. Each deploy saves a
// new revision before it plans; its Deploy Intent derives from it.
type SavedState struct {
	Context     string    `json:"context"`
	Project     string    `json:"project"`
	Environment string    `json:"environment"`
	Revision    int       `json:"revision"`
	Compose     []byte    `json:"-"`
	CreatedAt   time.Time `json:"created_at"`
}

// Removal is a project removal mark: the one persisted intent (docs/architecture.md
// bet 3). Commands that meet it finish what they can reach; it is never
// retried on a timer.
type Removal struct {
	Context     string    `json:"context"`
	Project     string    `json:"project"`
	Environment string    `json:"environment"`
	CreatedAt   time.Time `json:"created_at"`
}

// ErrNoSavedState means the project has no saved revision.
var ErrNoSavedState = errors.New("no saved state")

const savedSchema = `
CREATE TABLE IF NOT EXISTS saved_states (
  context     TEXT NOT NULL,
  project     TEXT NOT NULL,
  environment TEXT NOT NULL,
  revision    INTEGER NOT NULL,
  compose     BLOB NOT NULL,
  created_at  TEXT NOT NULL,
  PRIMARY KEY (context, project, environment, revision)
);
CREATE TABLE IF NOT EXISTS removals (
  context     TEXT NOT NULL,
  project     TEXT NOT NULL,
  environment TEXT NOT NULL,
  created_at  TEXT NOT NULL,
  PRIMARY KEY (context, project, environment)
);
`

// ensureSchema creates what's tables if they are missing (CREATE TABLE IF
// NOT EXISTS), naming what in the error.
func (s *Store) ensureSchema(what, schema string) error {
	if _, err := s.db.Exec(schema); err != nil {
		return fmt.Errorf("operator store: %s: %w", what, err)
	}
	return nil
}

func (s *Store) ensureSaved() error { return s.ensureSchema("saved states", savedSchema) }

// SaveState stores compose as the next revision of context/project/env
// and returns it. The revision number is assigned in one transaction. An
// empty compose is the revision a finished project removal saves.
func (s *Store) SaveState(context, project, env string, compose []byte) (SavedState, error) {
	if err := s.ensureSaved(); err != nil {
		return SavedState{}, err
	}
	tx, err := s.db.Begin()
	if err != nil {
		return SavedState{}, err
	}
	defer tx.Rollback() // after Commit it is a no-op
	var rev int
	if err := tx.QueryRow(`SELECT COALESCE(MAX(revision), 0) + 1 FROM saved_states WHERE context = ? AND project = ? AND environment = ?`,
		context, project, env).Scan(&rev); err != nil {
		return SavedState{}, fmt.Errorf("saved state of %s/%s: %w", project, env, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if _, err := tx.Exec(`INSERT INTO saved_states(context, project, environment, revision, compose, created_at) VALUES(?, ?, ?, ?, ?, ?)`,
		context, project, env, rev, append([]byte{}, compose...), now.Format(time.RFC3339)); err != nil {
		return SavedState{}, fmt.Errorf("save revision %d of %s/%s: %w", rev, project, env, err)
	}
	if err := tx.Commit(); err != nil {
		return SavedState{}, fmt.Errorf("save revision %d of %s/%s: %w", rev, project, env, err)
	}
	return SavedState{Context: context, Project: project, Environment: env, Revision: rev, Compose: compose, CreatedAt: now}, nil
}

// LatestState returns the newest revision, or ErrNoSavedState.
func (s *Store) LatestState(context, project, env string) (SavedState, error) {
	if err := s.ensureSaved(); err != nil {
		return SavedState{}, err
	}
	row := s.db.QueryRow(`SELECT revision, compose, created_at FROM saved_states WHERE context = ? AND project = ? AND environment = ? ORDER BY revision DESC LIMIT 1`,
		context, project, env)
	st := SavedState{Context: context, Project: project, Environment: env}
	var at string
	if err := row.Scan(&st.Revision, &st.Compose, &at); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return st, fmt.Errorf("%s/%s in context %q: %w", project, env, context, ErrNoSavedState)
		}
		return st, err
	}
	st.CreatedAt, _ = time.Parse(time.RFC3339, at)
	return st, nil
}

// State returns one revision, or an error naming the revisions there are.
func (s *Store) State(context, project, env string, revision int) (SavedState, error) {
	if err := s.ensureSaved(); err != nil {
		return SavedState{}, err
	}
	st := SavedState{Context: context, Project: project, Environment: env, Revision: revision}
	var at string
	err := s.db.QueryRow(`SELECT compose, created_at FROM saved_states WHERE context = ? AND project = ? AND environment = ? AND revision = ?`,
		context, project, env, revision).Scan(&st.Compose, &at)
	if errors.Is(err, sql.ErrNoRows) {
		latest, lerr := s.LatestState(context, project, env)
		if lerr != nil {
			return st, lerr
		}
		return st, fmt.Errorf("revision %d of %s/%s: no such revision (there are 1 to %d)", revision, project, env, latest.Revision)
	}
	if err != nil {
		return st, fmt.Errorf("revision %d of %s/%s: %w", revision, project, env, err)
	}
	st.CreatedAt, _ = time.Parse(time.RFC3339, at)
	return st, nil
}

// States lists every revision of a context (all projects), oldest first,
// without the compose bytes.
func (s *Store) States(context string) ([]SavedState, error) {
	if err := s.ensureSaved(); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(`SELECT project, environment, revision, created_at FROM saved_states WHERE context = ? ORDER BY project, environment, revision`, context)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SavedState
	for rows.Next() {
		st := SavedState{Context: context}
		var at string
		if err := rows.Scan(&st.Project, &st.Environment, &st.Revision, &at); err != nil {
			return nil, err
		}
		st.CreatedAt, _ = time.Parse(time.RFC3339, at)
		out = append(out, st)
	}
	return out, rows.Err()
}

// MarkRemoval records that project/env is to be removed.
func (s *Store) MarkRemoval(context, project, env string) error {
	if err := s.ensureSaved(); err != nil {
		return err
	}
	_, err := s.db.Exec(`INSERT INTO removals(context, project, environment, created_at) VALUES(?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		context, project, env, time.Now().UTC().Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("mark %s/%s for removal: %w", project, env, err)
	}
	return nil
}

// ClearRemoval drops a removal mark: the removal finished, or a new
// deploy of the project superseded it.
func (s *Store) ClearRemoval(context, project, env string) error {
	if err := s.ensureSaved(); err != nil {
		return err
	}
	_, err := s.db.Exec(`DELETE FROM removals WHERE context = ? AND project = ? AND environment = ?`, context, project, env)
	return err
}

// Removals lists a context's pending removal marks.
func (s *Store) Removals(context string) ([]Removal, error) {
	if err := s.ensureSaved(); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(`SELECT project, environment, created_at FROM removals WHERE context = ? ORDER BY project, environment`, context)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Removal
	for rows.Next() {
		r := Removal{Context: context}
		var at string
		if err := rows.Scan(&r.Project, &r.Environment, &at); err != nil {
			return nil, err
		}
		r.CreatedAt, _ = time.Parse(time.RFC3339, at)
		out = append(out, r)
	}
	return out, rows.Err()
}
