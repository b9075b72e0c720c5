package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLHoldsEveryTable: the concatenated schema creates the tables the
// typed clients name, and WriteDir writes the same files a Corrosion agent
// reads.
func TestSQLHoldsEveryTable(t *testing.T) {
	sql := SQL()
	for _, tbl := range []string{"machines", "containers", "serving", "serving_acks", "certificates", "cluster", "volumes",
		"history", "leases", "volume_runs", "jobs", "job_runs", "volume_policies", "allocations", "removals", "revisions", "deploy_records"} {
		if !strings.Contains(sql, "CREATE TABLE IF NOT EXISTS "+tbl+" (") {
			t.Errorf("schema does not create table %s", tbl)
		}
	}
	dir := t.TempDir()
	if err := WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	written, _ := filepath.Glob(filepath.Join(dir, "*.sql"))
	var all strings.Builder
	for _, f := range written {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		all.WriteString("\n")
	}
	if all.String() != sql {
		t.Fatalf("WriteDir wrote %d files that differ from SQL()", len(written))
	}
}
