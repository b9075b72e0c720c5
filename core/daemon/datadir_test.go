package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEnsureDataDirIsOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "lib", "ployz")
	if err := ensureDataDir(dir); err != nil {
		t.Fatal(err)
	}
	// A directory an older version left 0755 is tightened.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ensureDataDir(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, want 0700", fi.Mode().Perm())
	}
}
