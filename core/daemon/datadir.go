package daemon

import (
	"fmt"
	"os"
)

// ensureDataDir creates the data directory 0700 and tightens one a
// previous version (or a package) left looser: it holds the Machine's
// keys, record and store, and nothing in it is for other users.
func ensureDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("data directory %s: tighten mode %v to 0700: %w", dir, fi.Mode().Perm(), err)
		}
	}
	return nil
}
