// Package obsfs holds the file helpers both Observe Store plugins
// (logstore and metrics) keep their data with: a versioned directory
// that is deleted when it holds another format, small JSON state files
// written atomically, appends, and sizes.
package obsfs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ployz/ployz/internal/fsutil"
)

// OpenVersioned makes dir (0700) and its FORMAT file say version. A
// directory holding another version, or data with no version, is deleted
// first: the Observe Store has no migrations.
func OpenVersioned(dir, version string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	vf := filepath.Join(dir, "FORMAT")
	b, err := os.ReadFile(vf)
	if err == nil && strings.TrimSpace(string(b)) == version {
		return nil
	}
	if err == nil || !os.IsNotExist(err) || !emptyDir(dir) {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove unknown format: %w", err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	return os.WriteFile(vf, []byte(version+"\n"), 0o600)
}

func emptyDir(dir string) bool {
	es, err := os.ReadDir(dir)
	return err == nil && len(es) == 0
}

// LoadJSON reads path into v; a missing file leaves v alone.
func LoadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// SaveJSON writes v to path atomically, 0600.
func SaveJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, b, 0o600)
}

// AppendFile appends b to path, creating it and its directory (0700).
func AppendFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Size sums the sizes of the files under path (path itself if a file).
func Size(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
