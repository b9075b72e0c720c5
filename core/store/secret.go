package store

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ClusterSecret is 32 random bytes every Machine of one Cluster shares. The
// founding Machine creates it at init; a joiner receives it during
// enrollment. It lives only in a 0600 file on each Machine's disk, never in
// a replicated row. Keys for each use are derived from it (Derive), so one
// leaked derived key does not expose the others.
type ClusterSecret struct{ b [32]byte }

// ClusterSecretFile is the file's name inside the store's state directory.
const ClusterSecretFile = "cluster-secret"

// ClusterSecretPath is where a Machine with data directory dataDir keeps it.
func ClusterSecretPath(dataDir string) string {
	return filepath.Join(dataDir, "store", ClusterSecretFile)
}

// NewClusterSecret mints a fresh secret.
func NewClusterSecret() (ClusterSecret, error) {
	var s ClusterSecret
	if _, err := rand.Read(s.b[:]); err != nil {
		return s, fmt.Errorf("mint Cluster secret: %w", err)
	}
	return s, nil
}

// ParseClusterSecret reads the hex form (as carried by enrollment).
func ParseClusterSecret(h string) (ClusterSecret, error) {
	var s ClusterSecret
	b, err := hex.DecodeString(strings.TrimSpace(h))
	if err != nil || len(b) != len(s.b) {
		return s, fmt.Errorf("cluster secret: want %d bytes of hex", len(s.b))
	}
	copy(s.b[:], b)
	return s, nil
}

// Hex is the secret's transport form. Treat it like the secret itself.
func (s ClusterSecret) Hex() string { return hex.EncodeToString(s.b[:]) }

// IsZero reports an unset secret.
func (s ClusterSecret) IsZero() bool { return s.b == [32]byte{} }

// Derive returns a 32-byte key for one purpose, e.g. "gossip",
// "certificate-keys" or "spec-hash": HMAC-SHA256 of the purpose under the
// secret.
func (s ClusterSecret) Derive(purpose string) []byte {
	m := hmac.New(sha256.New, s.b[:])
	m.Write([]byte("ployz cluster secret v1: " + purpose))
	return m.Sum(nil)
}

// GossipKey is the AES-256 key of the store's gossip.
func (s ClusterSecret) GossipKey() []byte { return s.Derive("gossip") }

// ReadClusterSecretFile reads the secret, refusing a file others can read.
func ReadClusterSecretFile(path string) (ClusterSecret, error) {
	st, err := os.Stat(path)
	if err != nil {
		return ClusterSecret{}, fmt.Errorf("read Cluster secret: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return ClusterSecret{}, fmt.Errorf("cluster secret %s has mode %v: it must be readable by its owner only (chmod 600)", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ClusterSecret{}, fmt.Errorf("read Cluster secret: %w", err)
	}
	s, err := ParseClusterSecret(string(b))
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// LoadClusterSecret reads the secret of the Machine with data directory
// dataDir; other processes (certificate key encryption, spec hash salts)
// use this.
func LoadClusterSecret(dataDir string) (ClusterSecret, error) {
	return ReadClusterSecretFile(ClusterSecretPath(dataDir))
}

// WriteClusterSecretFile stores s at path (0600, directory 0700). Writing
// the same secret again is a no-op; replacing a different one is refused,
// since that would cut this Machine off from its Cluster.
func WriteClusterSecretFile(path string, s ClusterSecret) error {
	if s.IsZero() {
		return fmt.Errorf("refusing to write an empty Cluster secret")
	}
	old, err := ReadClusterSecretFile(path)
	switch {
	case err == nil && old == s:
		return nil
	case err == nil:
		return fmt.Errorf("%s already holds another Cluster's secret; `ployz machine rm`/reset this Machine first", path)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write Cluster secret: %w", err)
	}
	_, err = f.WriteString(s.Hex() + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write Cluster secret %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
