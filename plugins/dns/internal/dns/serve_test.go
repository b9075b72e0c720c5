package dns

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesBadSpec: a malformed spec is an error before anything
// is bound or answered.
func TestServeRefusesBadSpec(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dns.json")
	os.WriteFile(p, []byte(`{"machine":"m1","listen":"127.0.0.1:0","subnet":"127.0.0.0/8","store_api":"127.0.0.1:1"}`), 0o644)
	err := Serve(context.Background(), Options{SpecPath: p})
	if err == nil || !strings.Contains(err.Error(), `"listen"`) {
		t.Fatalf("Serve = %v", err)
	}
	if err := Serve(context.Background(), Options{SpecPath: filepath.Join(t.TempDir(), "missing.json")}); err == nil {
		t.Fatal("Serve without a spec served")
	}
}
