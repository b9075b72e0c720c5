package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bundleTar is the uncompressed tar of a bundle: a manifest for files
// (path -> content), then the files; extra members follow.
func bundleTar(tb testing.TB, files map[string]string, extra ...string) []byte {
	tb.Helper()
	m := Manifest{Format: 1, Version: "v1.2.3", ProtocolMajor: 1, OS: "linux", Arch: "amd64"}
	for p, body := range files {
		d := sha256.Sum256([]byte(body))
		m.Files = append(m.Files, File{Path: p, SHA256: hex.EncodeToString(d[:]), Mode: 0o755, Size: int64(len(body))})
	}
	mj, _ := json.Marshal(m)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name, body string) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		tw.Write([]byte(body)) // a bytes.Buffer
	}
	add(ManifestName, string(mj))
	for p, body := range files {
		add(p, body)
	}
	for _, name := range extra {
		add(name, "x")
	}
	tw.Close() // a bytes.Buffer
	return buf.Bytes()
}

// FuzzExtract unpacks arbitrary archives as the bundle an operator uploads
// with upgrade_machine (the daemon checks only its digest, which the
// sender chose). The fuzzed bytes are the tar inside the gzip, where a
// mutation means something. Properties: no panic; a refused bundle leaves
// neither the release directory nor its partial copy; an accepted one
// holds only the manifest and the files it lists, each with its digest,
// and nothing is written beside it.
func FuzzExtract(f *testing.F) {
	f.Add(bundleTar(f, map[string]string{"bin/ployzd": "daemon", "systemd/ployz.service": "[Unit]"}))
	f.Add(bundleTar(f, map[string]string{"bin/ployzd": "daemon"}, "../escaped"))
	f.Add(bundleTar(f, map[string]string{"bin/ployzd": "daemon", "bin": "not a directory"}))
	f.Add([]byte("not a tar"))
	target := Target{OS: "linux", Arch: "amd64", ProtocolMajor: 1}
	f.Fuzz(func(t *testing.T, archive []byte) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(archive) // a bytes.Buffer
		zw.Close()
		parent := t.TempDir()
		dir := filepath.Join(parent, "v")
		m, err := Extract(bytes.NewReader(gz.Bytes()), dir, target)
		ents, rerr := os.ReadDir(parent)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			if len(ents) != 0 {
				t.Fatalf("refused bundle (%v) left %s", err, ents[0].Name())
			}
			return
		}
		if len(ents) != 1 || ents[0].Name() != "v" {
			t.Fatalf("accepted bundle left %v beside the release", ents)
		}
		checkExtracted(t, dir, m)
	})
}

// checkExtracted walks an extracted release: every file is the manifest
// or a listed file with its digest.
func checkExtracted(t *testing.T, dir string, m *Manifest) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == ManifestName {
			return nil
		}
		f, ok := m.File(rel)
		if !ok || !d.Type().IsRegular() {
			t.Fatalf("extracted %s (%v), not a listed file", rel, d.Type())
		}
		got, err := FileDigest(p)
		if err != nil {
			return err
		}
		if got != f.SHA256 {
			t.Fatalf("%s: digest %s, manifest says %s", rel, got, f.SHA256)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestExtractRefusesSparse: a bundle whose listed member is a sparse
// entry (2.5 KB reading as a TiB of zeros) is refused before anything of
// it is written, rather than filling the disk up to the size the
// manifest claims and failing on the digest afterwards.
func TestExtractRefusesSparse(t *testing.T) {
	sparse, err := os.ReadFile("../tarsafe/testdata/sparse.tar")
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("daemon"))
	m := Manifest{Format: 1, Version: "v1.2.3", ProtocolMajor: 1, OS: "linux", Arch: "amd64", Files: []File{
		{Path: "bin/ployzd", SHA256: hex.EncodeToString(d[:]), Mode: 0o755, Size: 6},
		{Path: "big", SHA256: hex.EncodeToString(d[:]), Mode: 0o644, Size: 1 << 40},
	}}
	mj, _ := json.Marshal(m)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: ManifestName, Mode: 0o644, Size: int64(len(mj)), Typeflag: tar.TypeReg}) // a bytes.Buffer
	tw.Write(mj)
	tw.Flush() // no end blocks: the sparse archive follows
	zw.Write(sparse)
	zw.Close()
	dir := filepath.Join(t.TempDir(), "v")
	if _, err := Extract(bytes.NewReader(gz.Bytes()), dir, Target{OS: "linux", Arch: "amd64", ProtocolMajor: 1}); err == nil || !strings.Contains(err.Error(), "sparse") {
		t.Fatalf("Extract: %v, want the sparse member refused", err)
	}
}
