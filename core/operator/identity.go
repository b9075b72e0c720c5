package operator

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"unicode"
)

// Operator is who acts on a Cluster: a name (set per context, by default
// user@host) and the fingerprint of the SSH key used ("" over the local
// socket). Replicated records carry it, so every operator sees who did
// what.
type Operator struct {
	Name           string `json:"name"`
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
}

// String is "name (fingerprint)", or the name alone.
func (o Operator) String() string {
	if o.KeyFingerprint == "" {
		return o.Name
	}
	return o.Name + " (" + o.KeyFingerprint + ")"
}

// EnvOperator names the variable that sets the operator's name for every
// context (a CI job names itself there).
const EnvOperator = "PLOYZ_OPERATOR"

// DefaultOperatorName is PLOYZ_OPERATOR, else user@host.
func DefaultOperatorName() string {
	if v := strings.TrimSpace(os.Getenv(EnvOperator)); v != "" {
		return v
	}
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	return name
}

// ValidOperatorName refuses names a record or a terminal cannot carry.
func ValidOperatorName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("operator name %q: want 1 to 128 characters", name)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("operator name %q: control characters are not allowed", name)
		}
	}
	return nil
}

func operatorKey(context string) string { return "operator_name:" + context }

// OperatorName is the name records of context carry: PLOYZ_OPERATOR when
// set, else the one SetOperatorName saved, else user@host.
func (s *Store) OperatorName(context string) (string, error) {
	if v := strings.TrimSpace(os.Getenv(EnvOperator)); v != "" {
		return v, nil
	}
	var name string
	err := s.db.QueryRow(`SELECT value FROM settings WHERE key = ?`, operatorKey(context)).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return DefaultOperatorName(), nil
	}
	if err != nil {
		return "", fmt.Errorf("operator name of context %q: %w", context, err)
	}
	return name, nil
}

// SetOperatorName saves the name context's records carry ("" goes back
// to the default).
func (s *Store) SetOperatorName(context, name string) error {
	if _, err := s.Context(context); err != nil {
		return err
	}
	if name == "" {
		_, err := s.db.Exec(`DELETE FROM settings WHERE key = ?`, operatorKey(context))
		return err
	}
	if err := ValidOperatorName(name); err != nil {
		return err
	}
	_, err := s.db.Exec(`INSERT INTO settings(key, value) VALUES(?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, operatorKey(context), name)
	return err
}
