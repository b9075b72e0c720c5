package obsfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpenVersionedDeletesAnotherFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	if err := OpenVersioned(dir, "v1"); err != nil {
		t.Fatal(err)
	}
	AppendFile(filepath.Join(dir, "a", "b"), []byte("xy"))
	if err := OpenVersioned(dir, "v1"); err != nil || Size(dir) != int64(len("v1\n")+2) {
		t.Fatalf("same version kept? %v size %d", err, Size(dir))
	}
	if err := OpenVersioned(dir, "v2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Fatalf("data of v1 kept under v2: %v", err)
	}
	var v map[string]int
	if err := LoadJSON(filepath.Join(dir, "missing.json"), &v); err != nil || v != nil {
		t.Fatalf("missing file: %v %v", v, err)
	}
	SaveJSON(filepath.Join(dir, "x.json"), map[string]int{"a": 1})
	if err := LoadJSON(filepath.Join(dir, "x.json"), &v); err != nil || v["a"] != 1 {
		t.Fatalf("round trip: %v %v", v, err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("store dir mode %v", fi.Mode().Perm())
	}
}
