package containers

import (
	"archive/tar"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzUntar unpacks arbitrary bytes as a shipped directory's archive, as
// create_container hands it over from a caller. Properties: no panic;
// nothing is written beside the directory; inside it are only regular
// files and directories (no link can point a later write elsewhere).
func FuzzUntar(f *testing.F) {
	f.Add(tarOf(f, tarEntry{name: "conf/", typ: tar.TypeDir}, tarEntry{name: "conf/a.yaml", body: "a: 1", typ: tar.TypeReg}))
	f.Add(tarOf(f, tarEntry{name: "../escaped", body: "x", typ: tar.TypeReg}))
	f.Add(tarOf(f, tarEntry{name: "link", link: "..", typ: tar.TypeSymlink}, tarEntry{name: "link/x", body: "x", typ: tar.TypeReg}))
	f.Add(tarOf(f, tarEntry{name: "a", body: "x", typ: tar.TypeReg}, tarEntry{name: "a/b", body: "y", typ: tar.TypeReg}))
	f.Add([]byte("not a tar"))
	if b, err := os.ReadFile("../../../tarsafe/testdata/sparse.tar"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		root := filepath.Join(parent, "unpacked")
		_ = untar(root, b) // refusing is fine; escaping is not
		ents, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != "unpacked" {
				t.Fatalf("untar wrote %s beside its directory", e.Name())
			}
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && !d.Type().IsRegular() {
				t.Fatalf("untar left %s of type %v", p, d.Type())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
