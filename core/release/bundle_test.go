package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var linux = Target{OS: "linux", Arch: "amd64", ProtocolMajor: 1}

func writeSources(t *testing.T) []Source {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"bin/ployzd": "bar", "bin/ployz-dns": "foo", "systemd/ployz.service": "baz"}
	var srcs []Source
	for p, body := range files {
		from := filepath.Join(dir, filepath.Base(p))
		mode := os.FileMode(0o755)
		if strings.HasPrefix(p, "systemd/") {
			mode = 0o644
		}
		if err := os.WriteFile(from, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, Source{Path: p, From: from})
	}
	return srcs
}

func bundle(t *testing.T, m Manifest) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Write(&buf, m, writeSources(t)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBundleRoundTrip(t *testing.T) {
	b := bundle(t, Manifest{Version: "0.3.1", ProtocolMajor: 1, OS: "linux", Arch: "amd64"})
	dir := filepath.Join(t.TempDir(), "0.3.1")
	m, err := Extract(bytes.NewReader(b), dir, linux)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != "0.3.1" || len(m.Files) != 3 {
		t.Fatalf("manifest %+v", m)
	}
	got, err := os.ReadFile(filepath.Join(dir, "bin", "ployzd"))
	if err != nil || string(got) != "bar" {
		t.Fatalf("bin/ployzd = %q, %v", got, err)
	}
	st, _ := os.Stat(filepath.Join(dir, "bin", "ployzd"))
	if st.Mode().Perm() != 0o755 {
		t.Fatalf("bin/ployzd mode %v", st.Mode())
	}
	st, _ = os.Stat(filepath.Join(dir, "systemd", "ployz.service"))
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("unit mode %v", st.Mode())
	}
	again, err := ReadManifest(bytes.NewReader(b))
	if err != nil || again.Version != m.Version {
		t.Fatalf("ReadManifest: %+v %v", again, err)
	}
	if _, err := Extract(bytes.NewReader(b), dir, linux); err == nil {
		t.Fatal("Extract over an existing release succeeded")
	}
}

// rewrite copies a bundle, letting edit change each member's content.
func rewrite(t *testing.T, b []byte, edit func(name string, body []byte) []byte) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out bytes.Buffer
	gw := gzip.NewWriter(&out)
	tw := tar.NewWriter(gw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		body = edit(h.Name, body)
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	tw.Close()
	gw.Close()
	return out.Bytes()
}

func TestBundleCorruptDigestRefused(t *testing.T) {
	b := bundle(t, Manifest{Version: "0.3.1", ProtocolMajor: 1, OS: "linux", Arch: "amd64"})
	bad := rewrite(t, b, func(name string, body []byte) []byte {
		if name == "bin/ployz-dns" {
			return []byte("evil")
		}
		return body
	})
	dir := filepath.Join(t.TempDir(), "r")
	_, err := Extract(bytes.NewReader(bad), dir, linux)
	if err == nil || !strings.Contains(err.Error(), "bin/ployz-dns: sha256") {
		t.Fatalf("corrupt member: %v", err)
	}
	if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
		t.Fatal("a refused bundle left its release directory")
	}
	if _, serr := os.Stat(dir + ".partial"); !os.IsNotExist(serr) {
		t.Fatal("a refused bundle left its partial directory")
	}
}

func TestBundleWrongTargetRefused(t *testing.T) {
	b := bundle(t, Manifest{Version: "0.3.1", ProtocolMajor: 1, OS: "linux", Arch: "arm64"})
	_, err := Extract(bytes.NewReader(b), filepath.Join(t.TempDir(), "r"), linux)
	if err == nil || !strings.Contains(err.Error(), "arch is arm64") {
		t.Fatalf("wrong arch: %v", err)
	}
	b = bundle(t, Manifest{Version: "2.0.0", ProtocolMajor: 2, OS: "linux", Arch: "amd64"})
	_, err = Extract(bytes.NewReader(b), filepath.Join(t.TempDir(), "r"), linux)
	if err == nil || !strings.Contains(err.Error(), "protocol_major is 2") {
		t.Fatalf("other major: %v", err)
	}
	b = bundle(t, Manifest{Version: "0.3.1", ProtocolMajor: 1, OS: "darwin", Arch: "amd64"})
	_, err = Extract(bytes.NewReader(b), filepath.Join(t.TempDir(), "r"), linux)
	if err == nil || !strings.Contains(err.Error(), "os is darwin") {
		t.Fatalf("other os: %v", err)
	}
}

func TestManifestValidateNamesField(t *testing.T) {
	ok := Manifest{Format: 1, Version: "1.0", ProtocolMajor: 1, OS: "linux", Arch: "amd64",
		Files: []File{{Path: "bin/ployzd", SHA256: strings.Repeat("a", 64), Mode: 0o755}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Manifest){
		"version":         func(m *Manifest) { m.Version = "../x" },
		"protocol_major":  func(m *Manifest) { m.ProtocolMajor = 0 },
		"files[0].path":   func(m *Manifest) { m.Files[0].Path = "/etc/passwd" },
		"files[0].sha256": func(m *Manifest) { m.Files[0].SHA256 = "xyz" },
		"bin/ployzd":      func(m *Manifest) { m.Files[0].Path = "bin/other" },
		"os and arch":     func(m *Manifest) { m.Arch = "" },
	}
	for field, edit := range cases {
		m := ok
		m.Files = append([]File{}, ok.Files...)
		edit(&m)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// TestManifestFixture pins the manifest format: a manifest written by an
// earlier release (with a field from a later one) still reads, and what
// this release writes still carries every pinned field.
func TestManifestFixture(t *testing.T) {
	raw, err := os.ReadFile("testdata/manifest-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if m.Version != "0.3.1" || m.ProtocolMajor != 1 || m.OS != "linux" || m.Arch != "amd64" || len(m.Files) != 3 {
		t.Fatalf("fixture read as %+v", m)
	}
	f, _ := m.File("bin/ployzd")
	if f.SHA256 != "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9" || f.Mode != 0o755 || f.Size != 3 {
		t.Fatalf("bin/ployzd read as %+v", f)
	}
	out, _ := json.Marshal(m)
	var keys map[string]any
	json.Unmarshal(out, &keys)
	for _, k := range []string{"format", "version", "protocol_major", "os", "arch", "files"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("written manifest lacks %q", k)
		}
	}
	// The fixture's digests are those of the test sources, so the fixture is
	// exactly what Write produces for them (besides the unknown field).
	b := bundle(t, Manifest{Version: "0.3.1", ProtocolMajor: 1, OS: "linux", Arch: "amd64"})
	got, err := ReadManifest(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(got)
	if string(gotJSON) != string(out) {
		t.Fatalf("Write's manifest\n%s\ndiffers from the fixture\n%s", gotJSON, out)
	}
}

func writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }
