// Package bodyfixture checks a fixture file of frozen JSON bodies (the
// replicated rows of core/store and sdk/store): one JSON object whose
// fields name the bodies, each the bytes a writer produces.
package bodyfixture

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// Check reads the fixture at path and, for every body named in bodies
// (name -> a pointer to its zero value), checks that its entry decodes,
// re-encodes byte-identically (compacted), and still decodes with a field
// a newer writer added. An entry no body checks fails too: a fixture
// pins nothing unread.
func Check(t testing.TB, path string, bodies map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fx map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for name := range fx {
		if bodies[name] == nil {
			t.Errorf("%s: entry %q is checked by no body", path, name)
		}
	}
	names := make([]string, 0, len(bodies))
	for name := range bodies {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		entry, ok := fx[name]
		if !ok {
			t.Errorf("%s: entry %q missing", path, name)
			continue
		}
		checkEntry(t, name, entry, bodies[name])
	}
}

func checkEntry(t testing.TB, name string, entry json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(entry, v); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	again, _ := json.Marshal(v)
	var want bytes.Buffer
	if err := json.Compact(&want, entry); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want.Bytes()) {
		t.Errorf("%s re-encodes as\n%s\nwant\n%s", name, again, want.Bytes())
	}
	newer := append(bytes.TrimSuffix(bytes.TrimSpace(entry), []byte("}")), []byte(`,"added_later":{"x":1}}`)...)
	if err := json.Unmarshal(newer, v); err != nil {
		t.Errorf("%s with an unknown field: %v", name, err)
	}
}
