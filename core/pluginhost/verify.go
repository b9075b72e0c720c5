package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// DigestMismatchError refuses a binary whose content is not what the
// manifest installed.
type DigestMismatchError struct {
	// Plugin is the plugin's name.
	Plugin string
	// Path is the binary that was hashed.
	Path string
	// Want is the manifest's digest; Got is the file's.
	Want, Got string
}

// Error names the plugin and both digests, so an operator can tell a
// tampered or corrupted blob from a stale manifest.
func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("plugin %q: binary %s has sha256 %s, manifest expects %s; refusing to run it",
		e.Plugin, e.Path, e.Got, e.Want)
}

// FileDigest returns the hex sha256 of a file.
func FileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// VerifyBinary checks that path hashes to want. It returns a
// *DigestMismatchError when the content differs.
func VerifyBinary(plugin, path, want string) error {
	got, err := FileDigest(path)
	if err != nil {
		return fmt.Errorf("plugin %q: verify binary: %w", plugin, err)
	}
	if got != want {
		return &DigestMismatchError{Plugin: plugin, Path: path, Want: want, Got: got}
	}
	return nil
}
