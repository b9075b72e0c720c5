package store

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadClusterSecretFile: the hex file reads back the secret; a file
// others could read, a short or non-hex one is refused; derived keys are 32
// bytes and differ per purpose.
func TestReadClusterSecretFile(t *testing.T) {
	s, err := NewClusterSecret()
	if err != nil || s.IsZero() {
		t.Fatalf("mint: %v (zero %v)", err, s.IsZero())
	}
	p := filepath.Join(t.TempDir(), "cluster-secret")
	if err := os.WriteFile(p, []byte(s.Hex()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadClusterSecretFile(p)
	if err != nil || got != s {
		t.Fatalf("read: %v, equal %v", err, got == s)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadClusterSecretFile(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("group-readable secret: %v, want a refusal", err)
	}
	for _, bad := range []string{"abcd", strings.Repeat("zz", 32)} {
		if _, err := ParseClusterSecret(bad); err == nil {
			t.Fatalf("secret %q accepted", bad)
		}
	}
	if bytes.Equal(s.Derive("gossip"), s.Derive("certificate-keys")) || len(s.GossipKey()) != 32 || !bytes.Equal(s.GossipKey(), s.Derive("gossip")) {
		t.Fatal("derived keys must differ per purpose and be 32 bytes")
	}
}
