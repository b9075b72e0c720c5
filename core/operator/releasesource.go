package operator

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// ReleaseSetting is where a context takes Ployz releases from
// (docs/releases.md): a release source (URL or directory) and a channel.
type ReleaseSetting struct {
	Source  string `json:"source,omitempty"`
	Channel string `json:"channel,omitempty"`
}

func releaseKey(context string) string { return "release:" + context }

// ReleaseSetting is context's saved release source; the zero value when
// none was saved.
func (s *Store) ReleaseSetting(context string) (ReleaseSetting, error) {
	var raw string
	var rs ReleaseSetting
	err := s.db.QueryRow(`SELECT value FROM settings WHERE key = ?`, releaseKey(context)).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return rs, nil
	}
	if err != nil {
		return rs, fmt.Errorf("release source of context %q: %w", context, err)
	}
	if err := json.Unmarshal([]byte(raw), &rs); err != nil {
		return rs, fmt.Errorf("release source of context %q: %w", context, err)
	}
	return rs, nil
}

// SetReleaseSetting saves context's release source (the zero value
// removes it).
func (s *Store) SetReleaseSetting(context string, rs ReleaseSetting) error {
	if rs == (ReleaseSetting{}) {
		_, err := s.db.Exec(`DELETE FROM settings WHERE key = ?`, releaseKey(context))
		return err
	}
	b, _ := json.Marshal(rs)
	_, err := s.db.Exec(`INSERT INTO settings(key, value) VALUES(?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, releaseKey(context), string(b))
	return err
}
