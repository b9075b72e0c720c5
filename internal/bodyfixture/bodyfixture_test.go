package bodyfixture

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type body struct {
	Name string `json:"name,omitempty"`
	N    int    `json:"n"`
}

// recorder is a testing.TB that keeps what Check reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, f) }
func (r *recorder) Fatalf(f string, a ...any) { r.errs = append(r.errs, f); r.TB.Fatalf(f, a...) }

// TestCheck: an entry that re-encodes as written passes; one whose bytes a
// writer would not produce, a missing entry and an entry no body checks
// each fail.
func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bodies.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"good": {"name":"a","n":1}}`)
	Check(t, path, map[string]any{"good": &body{}})

	for fixture, want := range map[string]string{
		`{"good": {"n":1,"name":"a"}}`:           "re-encodes",
		`{"other": {"n":1}}`:                     "missing",
		`{"good": {"name":"a","n":1}, "x": {}}`:  "checked by no body",
		`{"good": {"name":"a","n":1,"extra":2}}`: "re-encodes",
	} {
		write(fixture)
		r := &recorder{TB: t}
		Check(r, path, map[string]any{"good": &body{}})
		if !strings.Contains(strings.Join(r.errs, "|"), want) {
			t.Errorf("fixture %s: reports %q, want one saying %q", fixture, r.errs, want)
		}
	}
}
