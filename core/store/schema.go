package store

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SchemaFS holds the replicated tables' schema files (Corrosion style: only
// CREATE TABLE and CREATE INDEX). They are frozen: only additive changes.
//
//go:embed schema/*.sql
var SchemaFS embed.FS

// SchemaSQL returns every schema file concatenated in name order.
func SchemaSQL() string {
	var b strings.Builder
	files, _ := fs.Glob(SchemaFS, "schema/*.sql")
	for _, f := range files {
		data, _ := SchemaFS.ReadFile(f)
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String()
}

// WriteSchemaDir writes the schema files into dir, for a store (or a real
// Corrosion agent) configured with schema_paths = [dir].
func WriteSchemaDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create schema dir %s: %w", dir, err)
	}
	files, err := fs.Glob(SchemaFS, "schema/*.sql")
	if err != nil {
		return fmt.Errorf("list embedded schema: %w", err)
	}
	for _, f := range files {
		data, err := SchemaFS.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read embedded %s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			return fmt.Errorf("write schema file: %w", err)
		}
	}
	return nil
}
