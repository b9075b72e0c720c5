package pluginhost

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzManifest feeds arbitrary bytes as manifest.json, which anyone who can
// write the plugin directory controls: LoadManifest must refuse or return a
// manifest that validates and survives Write and LoadManifest unchanged.
func FuzzManifest(f *testing.F) {
	d := "ab" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	for _, s := range []string{
		`{"plugins":[]}`, `{}`, `null`, `[]`, ``,
		`{"plugins":[{"name":"dns","sha256":"` + d + `","lifecycle":"long-lived","bundled":true}]}`,
		`{"plugins":[{"name":"volume-zfs","sha256":"` + d + `","lifecycle":"long-lived","bundled":true,"on_demand":true}]}`,
		`{"plugins":[{"name":"x","sha256":"` + d + `","lifecycle":"managed","config":{"a":[1,2]},"socket":"/tmp/x.sock"}]}`,
		`{"plugins":[{"name":"x","sha256":"` + d + `","lifecycle":"managed"},{"name":"x","sha256":"` + d + `","lifecycle":"managed"}]}`,
		`{"plugins":[{"name":"../x","sha256":"` + d + `","lifecycle":"managed"}]}`,
		`{"plugins":[{"name":"x","sha256":"../../etc/passwd","lifecycle":"managed"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(ManifestPath(dir), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := LoadManifest(ManifestPath(dir))
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("LoadManifest returned a manifest that does not validate: %v", err)
		}
		for _, e := range m.Plugins {
			// A valid entry never leads outside the plugin directory.
			for _, p := range []string{BlobPath(dir, e.SHA256), LinkPath(dir, e.Name)} {
				if rel, err := filepath.Rel(dir, p); err != nil || !filepath.IsLocal(rel) {
					t.Fatalf("entry %+v points outside the plugin directory: %s", e, p)
				}
			}
		}
		if err := m.Write(ManifestPath(dir)); err != nil {
			t.Fatalf("Write of a valid manifest: %v", err)
		}
		again, err := LoadManifest(ManifestPath(dir))
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		if !reflect.DeepEqual(normalize(m), normalize(again)) {
			t.Fatalf("round trip changed the manifest: %+v -> %+v", m, again)
		}
	})
}

// normalize compacts config JSON, which Write re-indents.
func normalize(m *Manifest) []Entry {
	out := make([]Entry, len(m.Plugins))
	for i, e := range m.Plugins {
		if len(e.Config) > 0 {
			var v any
			if json.Unmarshal(e.Config, &v) == nil {
				e.Config, _ = json.Marshal(v)
			}
		}
		out[i] = e
	}
	return out
}
