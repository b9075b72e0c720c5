package operator

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

func importedKey(context string) string { return "imported_to_cluster:" + context }

// ImportedToCluster reports when context's Saved State and deploy
// records were imported into its Cluster (zero: never).
func (s *Store) ImportedToCluster(context string) (time.Time, error) {
	var at string
	err := s.db.QueryRow(`SELECT value FROM settings WHERE key = ?`, importedKey(context)).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("import marker of context %q: %w", context, err)
	}
	t, _ := time.Parse(time.RFC3339, at)
	return t, nil
}

// MarkImportedToCluster records that context's import is done, so it
// runs once.
func (s *Store) MarkImportedToCluster(context string, at time.Time) error {
	_, err := s.db.Exec(`INSERT INTO settings(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
		importedKey(context), at.UTC().Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("import marker of context %q: %w", context, err)
	}
	return nil
}

// ImportPart names a part of a context's operator state that a later
// release moved into the Cluster, imported under a marker of its own: a
// store whose Saved State an earlier release imported still holds it.
type ImportPart string

const (
	// ImportVolumeRuns is the Volume Runs.
	ImportVolumeRuns ImportPart = "volume_runs"
	// ImportMarks is the allocation history and the removal marks.
	ImportMarks ImportPart = "marks"
)

// PartImportedToCluster reports whether part of context's operator state
// was imported into its Cluster.
func (s *Store) PartImportedToCluster(part ImportPart, context string) (bool, error) {
	at, err := s.ImportedToCluster(string(part) + ":" + context)
	return !at.IsZero(), err
}

// MarkPartImportedToCluster records that part of context's operator
// state is in its Cluster, so it is imported once.
func (s *Store) MarkPartImportedToCluster(part ImportPart, context string, at time.Time) error {
	return s.MarkImportedToCluster(string(part)+":"+context, at)
}

// VolumeRunsImportedToCluster reports whether context's Volume Runs
// were imported into its Cluster.
func (s *Store) VolumeRunsImportedToCluster(context string) (bool, error) {
	return s.PartImportedToCluster(ImportVolumeRuns, context)
}

// MarkVolumeRunsImportedToCluster records that context's Volume Runs
// are in its Cluster, so they are imported once.
func (s *Store) MarkVolumeRunsImportedToCluster(context string, at time.Time) error {
	return s.MarkPartImportedToCluster(ImportVolumeRuns, context, at)
}

// AllVolumeRuns are every run of context this store holds, oldest
// first (an import moves them all).
func (s *Store) AllVolumeRuns(context string) ([]VolumeRun, error) {
	runs, err := s.VolumeRuns(context, "", -1)
	slices.Reverse(runs)
	return runs, err
}
