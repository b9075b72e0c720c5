package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// secureFiles makes the store's files private before SQLite opens them:
// the directories 0700, the databases 0600. SQLite creates -wal and -shm
// with the mode of their database, so creating the database 0600 first
// covers those; files left by an older version are tightened in place.
func secureFiles(paths ...string) error {
	for _, p := range paths {
		dir := filepath.Dir(p)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create store directory %s: %w", dir, err)
		}
		if err := tighten(dir, 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		f.Close()
		for _, suffix := range []string{"", "-wal", "-shm", "-version"} {
			if err := tighten(p+suffix, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// tighten removes permission bits beyond mode; a missing file is fine.
func tighten(path string, mode fs.FileMode) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode().Perm()&^mode == 0 {
		return nil
	}
	if err := os.Chmod(path, st.Mode().Perm()&mode); err != nil {
		return fmt.Errorf("restrict %s to %v: %w", path, mode, err)
	}
	return nil
}
