package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/store/crdt"
)

// TestFileModes checks every file the store writes is 0600 and its
// directory 0700, including files an older version left world-readable.
func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// An older version's leftovers.
	if err := os.WriteFile(filepath.Join(dir, "subscriptions.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := Start(context.Background(), Config{DBPath: filepath.Join(dir, "store.db"), SchemaSQL: testSchemaSQL,
		APIAddr: "127.0.0.1:0", Token: "t", GossipAddr: "127.0.0.1:0", GossipKey: testGossipKey, Fast: true, Log: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, _, err := n.Engine().Exec(context.Background(), []crdt.Stmt{{Query: `INSERT INTO kv(k) VALUES ('a')`}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Engine().MarkShared(1); err != nil {
		t.Fatal(err)
	}
	resp := doRequest(t, n, "t", "POST", "/v1/subscriptions", []byte(`"SELECT k FROM kv"`))
	resp.Body.Close()
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("store directory mode %v (%v), want 0700", st.Mode().Perm(), err)
	}
	want := []string{"store.db", "store.db-wal", "store.db-shm", "store.db-version", "subscriptions.db", "subscriptions.db-wal", "subscriptions.db-shm"}
	for _, f := range want {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, _ := e.Info(); info != nil && info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is readable by others: %v", e.Name(), info.Mode().Perm())
		}
	}
}

// TestAPIRefusesNoToken checks the API fails closed: without a token the
// store does not serve it unless told it is a test.
func TestAPIRefusesNoToken(t *testing.T) {
	_, err := Start(context.Background(), Config{DBPath: filepath.Join(t.TempDir(), "store.db"), SchemaSQL: testSchemaSQL, APIAddr: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "no bearer token") {
		t.Fatalf("start without token: %v, want a refusal", err)
	}
}
