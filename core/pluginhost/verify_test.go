package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestVerifyInstalledCachesByFileState: a verified blob is recorded with
// its inode, size and times, so the next check needs no hash; a rewrite
// that keeps size and modification time still changes the change time and
// is hashed (and refused) again.
func TestVerifyInstalledCachesByFileState(t *testing.T) {
	dir := t.TempDir()
	content := []byte("#!/bin/sh\necho plugin\n")
	sum := sha256.Sum256(content)
	digest := hex.EncodeToString(sum[:])
	blob := BlobPath(dir, digest)
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, content, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := VerifyInstalled(dir, "p", digest); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(VerifiedPath(dir, digest)); err != nil {
		t.Fatalf("no verified record: %v", err)
	}
	if err := VerifyInstalled(dir, "p", digest); err != nil {
		t.Fatalf("second check: %v", err)
	}

	st, _ := os.Stat(blob)
	time.Sleep(20 * time.Millisecond) // a change time the kernel can tell apart
	tampered := []byte("#!/bin/sh\necho PLUGIN\n")
	if err := os.WriteFile(blob, tampered, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(blob, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	var mismatch *DigestMismatchError
	if err := VerifyInstalled(dir, "p", digest); !errors.As(err, &mismatch) {
		t.Fatalf("tampered blob (same size and mtime): %v, want a digest mismatch", err)
	}
}
