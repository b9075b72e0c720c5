package server

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestBadInput sends malformed or forbidden requests and checks each gets
// a clear error with the right status while the database stays unchanged.
// A transaction whose statement fails or is refused answers 500 with an
// ExecResponse, as Corrosion does; a body that does not parse answers 400.
func TestBadInput(t *testing.T) {
	n := startAPINode(t, "secret", func(c *Config) { c.MaxBodyBytes = 4096 })
	seed := doRequest(t, n, "secret", "POST", "/v1/transactions", []byte(`["INSERT INTO kv (k, v) VALUES ('a', 'one')"]`))
	if seed.StatusCode != 200 {
		t.Fatalf("seed write: %d", seed.StatusCode)
	}
	seed.Body.Close()
	before := dumpKV(t, n)
	schemaBefore := dumpSchema(t, n)
	bookBefore := n.Engine().Book()
	attachPath := filepath.Join(t.TempDir(), "attached.db")
	cases := []struct {
		name, token, method, path, body string
		status                          int
		msg                             string
	}{
		{"no token", "", "POST", "/v1/transactions", `["DELETE FROM kv"]`, 401, "bearer token"},
		{"wrong token", "nope", "POST", "/v1/transactions", `["DELETE FROM kv"]`, 401, "bearer token"},
		{"wrong token on health", "nope", "GET", "/v1/health", ``, 401, "bearer token"},
		{"malformed JSON", "secret", "POST", "/v1/transactions", `["DELETE FROM kv"`, 400, "malformed JSON"},
		{"not a statement", "secret", "POST", "/v1/transactions", `[42]`, 400, "statement must be"},
		{"object without query", "secret", "POST", "/v1/transactions", `[{"params":[]}]`, 400, `"query"`},
		{"empty transaction", "secret", "POST", "/v1/transactions", `[]`, 400, "at least 1 statement is required"},
		{"bad SQL", "secret", "POST", "/v1/transactions", `["DELETE FROM kv", "DELET FROM kv"]`, 500, "syntax error"},
		{"unknown table", "secret", "POST", "/v1/transactions", `["DELETE FROM kv", "INSERT INTO nope VALUES (1)"]`, 500, "no such table: nope"},
		{"unknown column", "secret", "POST", "/v1/transactions", `["DELETE FROM kv", "UPDATE kv SET zz = 1"]`, 500, "no such column: zz"},
		{"NOT NULL violated", "secret", "POST", "/v1/transactions", `["DELETE FROM kv", "INSERT INTO kv (k, v) VALUES ('b', NULL)"]`, 500, "kv.v"},
		{"primary key conflict", "secret", "POST", "/v1/transactions", `["DELETE FROM kv WHERE k = 'zz'", "INSERT INTO kv (k) VALUES ('a')"]`, 500, "kv.k"},
		{"schema change", "secret", "POST", "/v1/transactions", `["CREATE TABLE t2 (id TEXT PRIMARY KEY NOT NULL)"]`, 500, "schema change (CREATE)"},
		{"comment before DDL", "secret", "POST", "/v1/transactions", `["/* c */ CREATE TABLE t2 (id TEXT PRIMARY KEY NOT NULL)"]`, 500, "schema change (CREATE)"},
		{"line comment before DROP", "secret", "POST", "/v1/transactions", `["-- c\nDROP TABLE kv"]`, 500, "schema change (DROP)"},
		{"DDL after DML", "secret", "POST", "/v1/transactions", `["DELETE FROM kv; CREATE TABLE t2 (id TEXT PRIMARY KEY NOT NULL)"]`, 500, "more than one statement"},
		{"two DML statements", "secret", "POST", "/v1/transactions", `["DELETE FROM kv; DELETE FROM kv"]`, 500, "more than one statement"},
		{"attach", "secret", "POST", "/v1/transactions", `["ATTACH DATABASE '` + attachPath + `' AS x"]`, 500, "ATTACH is not allowed"},
		{"pragma write", "secret", "POST", "/v1/transactions", `["PRAGMA journal_mode=DELETE"]`, 500, "PRAGMA journal_mode is not allowed"},
		{"trigger", "secret", "POST", "/v1/transactions", `["CREATE TRIGGER t AFTER INSERT ON kv BEGIN DELETE FROM kv; END"]`, 500, "not allowed"},
		{"temp table", "secret", "POST", "/v1/transactions", `["INSERT INTO temp.__ployz_pending(tbl, pk, col) VALUES ('kv', 'x', 'v')"]`, 500, "not allowed"},
		{"read metadata in write", "secret", "POST", "/v1/transactions", `["INSERT INTO kv(k, v) SELECT site, 'x' FROM __ployz_clock"]`, 500, "reading main.__ployz_clock"},
		{"transaction control", "secret", "POST", "/v1/transactions", `["DELETE FROM kv", "COMMIT", "INSERT INTO nope VALUES (1)"]`, 500, "transaction control"},
		{"metadata write", "secret", "POST", "/v1/transactions", `["DELETE FROM __ployz_clock"]`, 500, "DELETE on main.__ployz_clock (not a table of the schema) is not allowed"},
		{"write through query", "secret", "POST", "/v1/queries", `"DELETE FROM kv"`, 400, "DELETE on main.kv in a query is not allowed"},
		{"attach through query", "secret", "POST", "/v1/queries", `"ATTACH DATABASE '` + attachPath + `' AS x"`, 400, "ATTACH in a query is not allowed"},
		{"comment DDL through query", "secret", "POST", "/v1/queries", `"/* c */ CREATE TABLE t2 (id TEXT PRIMARY KEY NOT NULL)"`, 400, "schema change (CREATE) in a query is not allowed"},
		{"line comment DROP through query", "secret", "POST", "/v1/queries", `"-- c\nDROP TABLE kv"`, 400, "schema change (DROP) in a query is not allowed"},
		{"two statements through query", "secret", "POST", "/v1/queries", `"SELECT 1; DELETE FROM kv"`, 400, "more than one statement"},
		{"pragma write through query", "secret", "POST", "/v1/queries", `"PRAGMA query_only=0"`, 400, "PRAGMA query_only is not allowed"},
		{"begin through query", "secret", "POST", "/v1/queries", `"BEGIN"`, 400, "transaction control"},
		{"bad query SQL", "secret", "POST", "/v1/queries", `"SELEC 1"`, 400, "syntax error"},
		{"bad subscription SQL", "secret", "POST", "/v1/subscriptions", `"SELECT * FROM nope"`, 400, "no such table"},
		{"bad from", "secret", "POST", "/v1/subscriptions?from=x", `"SELECT k FROM kv"`, 400, "change id"},
		{"oversized body", "secret", "POST", "/v1/transactions", `["` + strings.Repeat("x", 5000) + `"]`, 413, "exceeds 4096 bytes"},
		{"bad timeout", "secret", "POST", "/v1/transactions?timeout=soon", `["DELETE FROM kv"]`, 400, "timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := doRequest(t, n, tc.token, tc.method, tc.path, []byte(tc.body))
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d want %d: %s", resp.StatusCode, tc.status, b)
			}
			var v struct {
				Error   string `json:"error"`
				Results []struct {
					Error string `json:"error"`
				} `json:"results"`
			}
			if err := json.Unmarshal(bytes.TrimSpace(b), &v); err != nil {
				t.Fatalf("error body is not JSON: %s", b)
			}
			msg := v.Error
			if len(v.Results) > 0 {
				msg = v.Results[0].Error
			}
			if !strings.Contains(msg, tc.msg) {
				t.Fatalf("error %q does not mention %q", msg, tc.msg)
			}
		})
	}
	if after := dumpKV(t, n); !bytes.Equal(before, after) {
		t.Fatalf("database changed by rejected requests:\n before %s\n after  %s", before, after)
	}
	if after := dumpSchema(t, n); after != schemaBefore {
		t.Fatalf("schema changed by rejected requests:\n before %s\n after  %s", schemaBefore, after)
	}
	if _, err := os.Stat(attachPath); !os.IsNotExist(err) {
		t.Fatalf("ATTACH created %s (stat: %v)", attachPath, err)
	}
	if !reflect.DeepEqual(bookBefore, n.Engine().Book()) {
		t.Fatalf("version book changed: %v -> %v", bookBefore, n.Engine().Book())
	}
}

// TestH2C checks the API also answers HTTP/2 with prior knowledge.
func TestH2C(t *testing.T) {
	n := startAPINode(t, "", nil)
	hc := h2cClient()
	resp, err := hc.Post("http://"+n.APIAddr()+"/v1/queries", "application/json", strings.NewReader(`"SELECT 1"`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("proto %s status %d", resp.Proto, resp.StatusCode)
	}
}

// dumpSchema lists every schema object of the main database.
func dumpSchema(t *testing.T, n *Node) string {
	t.Helper()
	var out string
	if err := n.Engine().ReadDB().QueryRow(`SELECT group_concat(type || ' ' || name || ' ' || coalesce(sql, ''), char(10)) FROM (SELECT * FROM sqlite_master ORDER BY name)`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
