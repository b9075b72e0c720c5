// Package schema holds the replicated tables' schema files (Corrosion
// style: only CREATE TABLE and CREATE INDEX). They are frozen: only
// additive changes (docs/formats.md, "Stable promise"). A store node loads
// them at start; a real Corrosion agent reads them from a directory.
package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

//go:embed *.sql
var files embed.FS

// SQL returns every schema file concatenated in name order.
func SQL() string {
	var b strings.Builder
	names, _ := fs.Glob(files, "*.sql")
	for _, f := range names {
		data, _ := files.ReadFile(f)
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String()
}

// WriteDir writes the schema files into dir, for a store (or a real
// Corrosion agent) configured with schema_paths = [dir].
func WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create schema dir %s: %w", dir, err)
	}
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return fmt.Errorf("list embedded schema: %w", err)
	}
	for _, f := range names {
		data, err := files.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read embedded %s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return fmt.Errorf("write schema file: %w", err)
		}
	}
	return nil
}
