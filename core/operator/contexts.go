package operator

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Connection is one way to reach an Entry Machine of a context.
type Connection struct {
	// URL is ssh://[user@]host[:port], unix:///path or tcp://host:port.
	URL string `json:"url"`
	// SSHKey is a private key file for ssh:// URLs; empty uses the defaults.
	SSHKey string `json:"ssh_key,omitempty"`
}

// Validate refuses a URL the CLI cannot dial, naming the part at fault.
func (c Connection) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("connection %q: %w", c.URL, err)
	}
	switch u.Scheme {
	case "ssh", "tcp":
		if u.Host == "" {
			return fmt.Errorf("connection %q: host is empty", c.URL)
		}
	case "unix":
		if u.Path == "" {
			return fmt.Errorf("connection %q: socket path is empty", c.URL)
		}
	default:
		return fmt.Errorf("connection %q: scheme %q is not one of ssh, unix, tcp", c.URL, u.Scheme)
	}
	return nil
}

// Context names one Cluster and how to reach it.
type Context struct {
	Name        string       `json:"name"`
	Current     bool         `json:"current"`
	Network     string       `json:"network,omitempty"`
	Connections []Connection `json:"connections"`
}

// SaveContext creates or replaces a context (its connections in order).
func (s *Store) SaveContext(c Context) error {
	if err := validContextName(c.Name); err != nil {
		return err
	}
	for _, conn := range c.Connections {
		if err := conn.Validate(); err != nil {
			return err
		}
	}
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit it is a no-op
	if _, err := tx.Exec(`INSERT INTO contexts(name, network) VALUES(?, ?)
		ON CONFLICT(name) DO UPDATE SET network = excluded.network`, c.Name, c.Network); err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM connections WHERE context = ?`, c.Name); err != nil {
		return err
	}
	for i, conn := range c.Connections {
		if _, err := tx.Exec(`INSERT INTO connections(context, position, url, ssh_key) VALUES(?, ?, ?, ?)`,
			c.Name, i, conn.URL, conn.SSHKey); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func validContextName(name string) error {
	if name == "" || strings.ContainsAny(name, " \t\n/") {
		return fmt.Errorf("context name %q: use a word without spaces or slashes", name)
	}
	return nil
}

// AddConnection appends a connection to a context unless it is there.
func (s *Store) AddConnection(name string, conn Connection) error {
	c, err := s.Context(name)
	if err != nil {
		return err
	}
	for _, have := range c.Connections {
		if have.URL == conn.URL {
			return nil
		}
	}
	c.Connections = append(c.Connections, conn)
	return s.SaveContext(c)
}

// RemoveConnection drops the connection with url from a context (an
// uninstalled Machine's); removed says whether it was there. The last
// connection stays: a context without one reaches nothing.
func (s *Store) RemoveConnection(name, url string) (removed bool, err error) {
	c, err := s.Context(name)
	if err != nil {
		return false, err
	}
	kept := slices.DeleteFunc(slices.Clone(c.Connections), func(have Connection) bool { return have.URL == url })
	if len(kept) == len(c.Connections) || len(kept) == 0 {
		return false, nil
	}
	c.Connections = kept
	return true, s.SaveContext(c)
}

// Contexts lists every context, the current one marked.
func (s *Store) Contexts() ([]Context, error) {
	cur, _ := s.currentName()
	rows, err := s.db.Query(`SELECT name, network FROM contexts ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var out []Context
	for rows.Next() {
		var c Context
		if err := rows.Scan(&c.Name, &c.Network); err != nil {
			rows.Close()
			return nil, err
		}
		c.Current = c.Name == cur
		out = append(out, c)
	}
	rows.Close()
	for i := range out {
		if out[i].Connections, err = s.connections(out[i].Name); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}

// Context returns the named context, or an error listing the valid names.
func (s *Store) Context(name string) (Context, error) {
	all, err := s.Contexts()
	if err != nil {
		return Context{}, err
	}
	names := make([]string, 0, len(all))
	for _, c := range all {
		if c.Name == name {
			return c, nil
		}
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return Context{}, fmt.Errorf("context %q: %w (there are none yet: `ployz machine init` creates one)", name, ErrNoContext)
	}
	return Context{}, fmt.Errorf("context %q: %w (valid: %s)", name, ErrNoContext, strings.Join(names, ", "))
}

// Current returns the selected context.
func (s *Store) Current() (Context, error) {
	name, err := s.currentName()
	if err != nil {
		return Context{}, err
	}
	return s.Context(name)
}

func (s *Store) currentName() (string, error) {
	var name string
	err := s.db.QueryRow(`SELECT value FROM settings WHERE key = 'current_context'`).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w selected: `ployz ctx use NAME` selects one", ErrNoContext)
	}
	return name, err
}

// Use selects the named context.
func (s *Store) Use(name string) error {
	if _, err := s.Context(name); err != nil {
		return err
	}
	_, err := s.db.Exec(`INSERT INTO settings(key, value) VALUES('current_context', ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, name)
	return err
}

// RemoveContext deletes a context and its connections. Its allocation
// history stays: it is kept after failures and removals alike.
func (s *Store) RemoveContext(name string) error {
	if _, err := s.Context(name); err != nil {
		return err
	}
	for _, q := range []string{`DELETE FROM contexts WHERE name = ?`, `DELETE FROM connections WHERE context = ?`,
		`DELETE FROM settings WHERE key = 'current_context' AND value = ?`,
		`DELETE FROM settings WHERE key = 'operator_name:' || ?`, `DELETE FROM settings WHERE key = 'release:' || ?`} {
		if _, err := s.db.Exec(q, name); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) connections(name string) ([]Connection, error) {
	rows, err := s.db.Query(`SELECT url, ssh_key FROM connections WHERE context = ? ORDER BY position`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Connection{}
	for rows.Next() {
		var c Connection
		if err := rows.Scan(&c.URL, &c.SSHKey); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
