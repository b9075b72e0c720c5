package client

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The flag wins, then the compose file's name:, then the only saved
// project; two saved projects and no file ask which.
func TestProjectName(t *testing.T) {
	fc, _ := newFake(t, "m1")
	ctx := context.Background()
	compose := filepath.Join(t.TempDir(), "compose.yaml")
	missing := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(compose, []byte("name: shop\nservices:\n  web:\n    image: app:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Store.SaveState("lab", "blog", "prod", []byte("name: blog\n")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ named, path, want string }{{"given", compose, "given"}, {"", compose, "shop"}, {"", missing, "blog"}} {
		if got, err := ProjectName(ctx, fc.Store, "lab", tc.named, "prod", tc.path); err != nil || got != tc.want {
			t.Errorf("ProjectName(%q, %s) = %q, %v, want %q", tc.named, tc.path, got, err, tc.want)
		}
	}
	if _, err := fc.Store.SaveState("lab", "wiki", "prod", []byte("name: wiki\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := ProjectName(ctx, fc.Store, "lab", "", "prod", missing); err == nil || !strings.Contains(err.Error(), "blog, wiki") {
		t.Errorf("two saved projects: %v, want the question naming both", err)
	}
}
