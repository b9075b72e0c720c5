package store

import (
	"strings"
	"testing"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// TestSealerBindsRowAndCluster: a sealed value opens for its row only,
// and not with another Cluster's secret or once tampered with.
func TestSealerBindsRowAndCluster(t *testing.T) {
	a, _ := sdkstore.NewClusterSecret()
	b, _ := sdkstore.NewClusterSecret()
	sa, err := NewSealer(a, SavedStatePurpose, "revisions", "compose")
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := NewSealer(b, SavedStatePurpose, "revisions", "compose")
	sealed, err := sa.Seal("r1", []byte("services:\n  web:\n    environment: {TOKEN: s3cret}\n"))
	if err != nil || !strings.HasPrefix(sealed, SealedPrefix) || strings.Contains(sealed, "s3cret") {
		t.Fatalf("sealed %q, %v", sealed, err)
	}
	if pt, err := sa.Open("r1", sealed); err != nil || !strings.Contains(string(pt), "TOKEN: s3cret") {
		t.Fatalf("open: %q %v", pt, err)
	}
	for name, open := range map[string]func() ([]byte, error){
		"other row":     func() ([]byte, error) { return sa.Open("r2", sealed) },
		"other Cluster": func() ([]byte, error) { return sb.Open("r1", sealed) },
		"tampered":      func() ([]byte, error) { return sa.Open("r1", sealed[:len(sealed)-4]+"AAAA") },
		"plain":         func() ([]byte, error) { return sa.Open("r1", "services: {}") },
	} {
		if _, err := open(); err == nil || !strings.Contains(err.Error(), `"compose"`) {
			t.Errorf("%s: %v, want a refusal naming the field", name, err)
		}
	}
	if _, err := NewSealer(sdkstore.ClusterSecret{}, SavedStatePurpose, "revisions", "compose"); err == nil {
		t.Fatal("an empty secret made a sealer")
	}
}
