package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ployz/ployz/internal/fsutil"
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

// verifiedKey identifies one state of a blob on disk. The change time is
// in it because nothing but the kernel sets it: a rewrite that restores
// size and modification time still changes it.
type verifiedKey struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
}

func keyOf(path string) (verifiedKey, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return verifiedKey{}, fmt.Errorf("stat %s: %w", path, err)
	}
	return verifiedKey{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size,
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano()}, nil
}

// VerifiedPath is where VerifyInstalled records that the blob of digest
// hashed to it, and in which state of the file.
func VerifiedPath(dir, digest string) string { return filepath.Join(dir, "verified", digest) }

// VerifyInstalled checks the installed blob of digest like VerifyBinary,
// but hashes it only when its inode, size, modification or change time
// differ from the last successful check: hashing a plugin binary takes
// seconds on a loaded Machine, and the unit's ExecStartPre runs this
// before every start, while the data plane's sockets wait in the fd store.
func VerifyInstalled(dir, plugin, digest string) error {
	blob := BlobPath(dir, digest)
	key, err := keyOf(blob)
	if err != nil {
		return fmt.Errorf("plugin %q: verify binary: %w", plugin, err)
	}
	var seen verifiedKey
	if b, err := os.ReadFile(VerifiedPath(dir, digest)); err == nil && json.Unmarshal(b, &seen) == nil && seen == key {
		return nil
	}
	if err := VerifyBinary(plugin, blob, digest); err != nil {
		return err
	}
	b, _ := json.Marshal(key)
	if err := os.MkdirAll(filepath.Dir(VerifiedPath(dir, digest)), 0o700); err == nil {
		_ = fsutil.WriteFileAtomic(VerifiedPath(dir, digest), b, 0o600) // only a cache: the next check hashes again
	}
	return nil
}
