package store

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// ClusterSecret is 32 random bytes every Machine of one Cluster shares. The
// founding Machine creates it at init; a joiner receives it during
// enrollment. It lives only in a 0600 file on each Machine's disk, never in
// a replicated row. Keys for each use are derived from it (Derive), so one
// leaked derived key does not expose the others.
type ClusterSecret struct{ b [32]byte }

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
