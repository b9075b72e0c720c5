package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

func TestClusterSecretFile(t *testing.T) {
	dir := t.TempDir()
	s, err := sdkstore.NewClusterSecret()
	if err != nil {
		t.Fatal(err)
	}
	p := ClusterSecretPath(dir)
	if err := WriteClusterSecretFile(p, s); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	got, err := LoadClusterSecret(dir)
	if err != nil || got != s {
		t.Fatalf("load: %v, equal %v", err, got == s)
	}
	if err := WriteClusterSecretFile(p, s); err != nil {
		t.Fatalf("rewriting the same secret: %v", err)
	}
	other, _ := sdkstore.NewClusterSecret()
	if err := WriteClusterSecretFile(p, other); err == nil || !strings.Contains(err.Error(), "another Cluster") {
		t.Fatalf("replacing the secret: %v, want a refusal", err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadClusterSecret(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable secret: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "store", ClusterSecretFile+".tmp")); !os.IsNotExist(err) {
		t.Fatal("temporary file left behind")
	}
}
