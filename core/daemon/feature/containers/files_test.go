package containers

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tarEntry is one member of a test archive.
type tarEntry struct {
	name, body, link string
	typ              byte
}

func tarOf(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestUntarRefusesEscapes: a shipped directory's archive comes from the
// operator's machine over RPC; no member may write outside the directory
// it unpacks into, by name or through a link.
func TestUntarRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tarEntry
	}{
		{"parent", []tarEntry{{name: "../escaped", body: "x", typ: tar.TypeReg}}},
		{"parent below a directory", []tarEntry{{name: "a/../../escaped", body: "x", typ: tar.TypeReg}}},
		{"bare parent", []tarEntry{{name: "..", typ: tar.TypeDir}}},
		{"absolute", []tarEntry{{name: "/tmp/escaped", body: "x", typ: tar.TypeReg}}},
		{"symlink out", []tarEntry{{name: "link", link: "..", typ: tar.TypeSymlink}, {name: "link/escaped", body: "x", typ: tar.TypeReg}}},
		{"absolute symlink", []tarEntry{{name: "link", link: "/", typ: tar.TypeSymlink}}},
		{"hardlink out", []tarEntry{{name: "hard", link: "../../etc/passwd", typ: tar.TypeLink}}},
		{"hardlink in", []tarEntry{{name: "a", body: "x", typ: tar.TypeReg}, {name: "hard", link: "a", typ: tar.TypeLink}}},
		{"device", []tarEntry{{name: "dev", typ: tar.TypeChar}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			root := filepath.Join(parent, "d", "unpacked")
			if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
				t.Fatal(err)
			}
			err := untar(root, tarOf(t, tc.entries...))
			if err == nil {
				t.Fatalf("untar accepted %+v", tc.entries)
			}
			if !strings.Contains(err.Error(), "archive entry") {
				t.Fatalf("error %q does not name the archive entry", err)
			}
			// Nothing landed beside the directory or above it.
			for _, dir := range []string{parent, filepath.Dir(root)} {
				ents, _ := os.ReadDir(dir)
				for _, e := range ents {
					if e.Name() != "d" && e.Name() != "unpacked" {
						t.Fatalf("untar wrote %s outside its directory", filepath.Join(dir, e.Name()))
					}
				}
			}
		})
	}
}

// TestUntarUnpacksFilesAndDirectories is the archive untar exists for.
func TestUntarUnpacksFilesAndDirectories(t *testing.T) {
	root := filepath.Join(t.TempDir(), "unpacked")
	b := tarOf(t,
		tarEntry{name: "conf/", typ: tar.TypeDir},
		tarEntry{name: "conf/app.yaml", body: "a: 1\n", typ: tar.TypeReg},
		tarEntry{name: "./top.txt", body: "top", typ: tar.TypeReg},
		tarEntry{name: "deep/er/file", body: "deep", typ: tar.TypeReg},
	)
	if err := untar(root, b); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"conf/app.yaml": "a: 1\n", "top.txt": "top", "deep/er/file": "deep"} {
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(got) != want {
			t.Fatalf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
}

// TestUntarRefusesSparse: a sparse entry of a few bytes reads as a TiB of
// zeros; untar refuses it rather than writing its first MiB, which a
// 1 MiB archive of such entries would turn into hundreds of MiB on disk.
func TestUntarRefusesSparse(t *testing.T) {
	b, err := os.ReadFile("../../../tarsafe/testdata/sparse.tar")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "unpacked")
	if err := untar(root, b); err == nil || !strings.Contains(err.Error(), "sparse") {
		t.Fatalf("untar: %v, want the sparse entry refused", err)
	}
	if _, err := os.Stat(filepath.Join(root, "big")); !os.IsNotExist(err) {
		t.Fatalf("the sparse entry was written (%v)", err)
	}
}
