package operator

import (
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ImportPart names one part of a context's import into its Cluster,
// marked done on its own: a release that moves more state into the
// Cluster imports the new part once even where an earlier part ran.
type ImportPart string

const (
	// ImportSavedState is Saved State revisions and deploy records.
	ImportSavedState ImportPart = ""
	// ImportMarks is the allocation history and removal marks.
	ImportMarks ImportPart = "marks"
)

func importedKey(context string, part ImportPart) string {
	if part == ImportSavedState {
		return "imported_to_cluster:" + context
	}
	return "imported_" + string(part) + "_to_cluster:" + context
}

// ImportedToCluster reports when part of context's operator state was
// imported into its Cluster (zero: never).
func (s *Store) ImportedToCluster(context string, part ImportPart) (time.Time, error) {
	var at string
	err := s.db.QueryRow(`SELECT value FROM settings WHERE key = ?`, importedKey(context, part)).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("import marker of context %q: %w", context, err)
	}
	t, _ := time.Parse(time.RFC3339, at)
	return t, nil
}

// MarkImportedToCluster records that part of context's import is done,
// so it runs once.
func (s *Store) MarkImportedToCluster(context string, part ImportPart, at time.Time) error {
	_, err := s.db.Exec(`INSERT INTO settings(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
		importedKey(context, part), at.UTC().Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("import marker of context %q: %w", context, err)
	}
	return nil
}
