package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
)

// These tests pin the exact lines a Corrosion client reads from the
// subscription routes: every line, in order, and nothing after it. A
// client written for Corrosion treats any line it does not expect (a
// columns line on a resume, an eoq under skip_rows) as a protocol error.

var timeRe = regexp.MustCompile(`"time":[0-9.e+-]+`)

// lineStream reads NDJSON lines from a response on its own goroutine, so a
// test can wait for a line or for silence.
type lineStream struct {
	resp  *http.Response
	lines chan string
}

func openStream(t *testing.T, n *Node, method, path, body string) *lineStream {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	resp := doRequest(t, n, "secret", method, path, b)
	ls := &lineStream{resp: resp, lines: make(chan string, 64)}
	go func() {
		defer close(ls.lines)
		rd := bufio.NewReader(resp.Body)
		for {
			line, err := rd.ReadString('\n')
			if line != "" {
				ls.lines <- timeRe.ReplaceAllString(line, `"time":0`)
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return ls
}

// expect reads exactly want (each a line without its newline), then
// checks nothing more arrives for a moment.
func (ls *lineStream) expect(t *testing.T, want ...string) {
	t.Helper()
	for i, w := range want {
		select {
		case got, ok := <-ls.lines:
			if !ok {
				t.Fatalf("line %d: stream ended, want %s", i, w)
			}
			if got != w+"\n" {
				t.Fatalf("line %d:\n got  %q\n want %q", i, got, w+"\n")
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("line %d: nothing within 5s, want %s", i, w)
		}
	}
	select {
	case got, ok := <-ls.lines:
		if ok {
			t.Fatalf("unexpected line after %d expected: %q", len(want), got)
		}
	case <-time.After(300 * time.Millisecond):
	}
}

func (ls *lineStream) status(t *testing.T, want int) {
	t.Helper()
	if ls.resp.StatusCode != want {
		t.Fatalf("status %d, want %d", ls.resp.StatusCode, want)
	}
}

func exec(t *testing.T, n *Node, body string) {
	t.Helper()
	r := doRequest(t, n, "secret", "POST", "/v1/transactions", []byte(body))
	defer r.Body.Close()
	if r.StatusCode != 200 {
		b, _ := io.ReadAll(r.Body)
		t.Fatalf("transaction %s: %d %s", body, r.StatusCode, b)
	}
}

func bodyOf(t *testing.T, r *http.Response) string {
	t.Helper()
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

func TestCorrosionSubscriptionLines(t *testing.T) {
	n := startAPINode(t, "secret", nil)
	exec(t, n, `["INSERT INTO kv (k, v) VALUES ('a', 'one')", "INSERT INTO kv (k, v) VALUES ('b', 'two')"]`)
	const q = `"SELECT k, v FROM kv ORDER BY k"`
	first := openStream(t, n, "POST", "/v1/subscriptions", q)
	first.status(t, 200)
	id := first.resp.Header.Get("corro-query-id")
	first.expect(t, `{"columns":["k","v"]}`, `{"row":[1,["a","one"]]}`, `{"row":[2,["b","two"]]}`, `{"eoq":{"time":0,"change_id":0}}`)
	exec(t, n, `["UPDATE kv SET v = 'uno' WHERE k = 'a'"]`)
	first.expect(t, `{"change":["update",1,["a","uno"],1]}`)
	exec(t, n, `["INSERT INTO kv (k, v) VALUES ('c', 'three')"]`)
	first.expect(t, `{"change":["insert",3,["c","three"],2]}`)

	t.Run("resume from a change id sends only later changes", func(t *testing.T) {
		s := openStream(t, n, "GET", "/v1/subscriptions/"+id+"?from=1", "")
		s.status(t, 200)
		s.expect(t, `{"change":["insert",3,["c","three"],2]}`)
		s = openStream(t, n, "GET", "/v1/subscriptions/"+id+"?from=2", "")
		s.expect(t)
	})
	t.Run("from=0 is a fresh snapshot", func(t *testing.T) {
		for _, path := range []string{"?from=0", "", "?from=0&skip_rows=false"} {
			s := openStream(t, n, "GET", "/v1/subscriptions/"+id+path, "")
			s.expect(t, `{"columns":["k","v"]}`, `{"row":[1,["a","uno"]]}`, `{"row":[2,["b","two"]]}`, `{"row":[3,["c","three"]]}`, `{"eoq":{"time":0,"change_id":2}}`)
		}
	})
	t.Run("skip_rows sends changes only", func(t *testing.T) {
		byID := openStream(t, n, "GET", "/v1/subscriptions/"+id+"?skip_rows=true", "")
		byQuery := openStream(t, n, "POST", "/v1/subscriptions?skip_rows=true", q)
		fresh := openStream(t, n, "POST", "/v1/subscriptions?skip_rows=true", `"SELECT v FROM kv WHERE k = 'b'"`)
		fresh.status(t, 200)
		byID.expect(t)
		byQuery.expect(t)
		fresh.expect(t)
		exec(t, n, `["DELETE FROM kv WHERE k = 'b'"]`)
		byID.expect(t, `{"change":["delete",2,["b","two"],3]}`)
		byQuery.expect(t, `{"change":["delete",2,["b","two"],3]}`)
		fresh.expect(t, `{"change":["delete",1,["two"],1]}`)
		first.expect(t, `{"change":["delete",2,["b","two"],3]}`)
	})
	t.Run("POST from= resumes an existing query", func(t *testing.T) {
		s := openStream(t, n, "POST", "/v1/subscriptions?from=1", q)
		s.status(t, 200)
		if s.resp.Header.Get("corro-query-id") != id {
			t.Fatalf("POST ?from= answered subscription %s, want %s", s.resp.Header.Get("corro-query-id"), id)
		}
		s.expect(t, `{"change":["insert",3,["c","three"],2]}`, `{"change":["delete",2,["b","two"],3]}`)
	})
	t.Run("POST from= on a new query is refused", func(t *testing.T) {
		r := doRequest(t, n, "secret", "POST", "/v1/subscriptions?from=1", []byte(`"SELECT k FROM kv"`))
		if got := bodyOf(t, r); r.StatusCode != 400 || got != `{"error":"a `+"`from`"+` query param was supplied, but no existing subscription found"}`+"\n" {
			t.Fatalf("got %d %s", r.StatusCode, got)
		}
	})
	t.Run("ids", func(t *testing.T) {
		r := doRequest(t, n, "secret", "GET", "/v1/subscriptions/not-a-uuid", nil)
		if got := bodyOf(t, r); r.StatusCode != 400 || !strings.Contains(got, "not a UUID") {
			t.Fatalf("non-UUID id: %d %s", r.StatusCode, got)
		}
		r = doRequest(t, n, "secret", "GET", "/v1/subscriptions/00000000-0000-4000-8000-000000000000", nil)
		if got := bodyOf(t, r); r.StatusCode != 404 || got != `{"error":"could not find subscription with id 00000000-0000-4000-8000-000000000000"}`+"\n" {
			t.Fatalf("unknown id: %d %s", r.StatusCode, got)
		}
		// Corrosion parses the id as a UUID: the simple and upper-case
		// forms name the same subscription.
		s := openStream(t, n, "GET", "/v1/subscriptions/"+strings.ToUpper(strings.ReplaceAll(id, "-", ""))+"?from=2", "")
		s.status(t, 200)
		s.expect(t, `{"change":["delete",2,["b","two"],3]}`)
	})
	t.Run("from older than the retained log is an error event", func(t *testing.T) {
		if _, err := n.subs.db.Exec(`DELETE FROM sub_changes WHERE sub = ? AND change_id < 3`, id); err != nil {
			t.Fatal(err)
		}
		s := openStream(t, n, "GET", "/v1/subscriptions/"+id+"?from=1", "")
		s.status(t, 200)
		s.expect(t, `{"error":"subscription already deleted older changes, min change id: 3"}`)
		if _, ok := <-s.lines; ok {
			t.Fatal("stream goes on after the error event")
		}
	})
}

// TestCorrosionResumeAfterRestart stops the server, changes the database
// while it is down (as a merge from a peer would at startup), and checks a
// resume gets exactly the missed changes with contiguous ids, then live ones.
func TestCorrosionResumeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DBPath: filepath.Join(dir, "store.db"), SchemaSQL: testSchemaSQL, APIAddr: "127.0.0.1:0",
		Token: "secret", Log: testLogger()}
	n, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	const q = `"SELECT k, v FROM kv ORDER BY k"`
	s := openStream(t, n, "POST", "/v1/subscriptions", q)
	id := s.resp.Header.Get("corro-query-id")
	s.expect(t, `{"columns":["k","v"]}`, `{"eoq":{"time":0,"change_id":0}}`)
	exec(t, n, `["INSERT INTO kv (k, v) VALUES ('a', '1')"]`)
	exec(t, n, `["INSERT INTO kv (k, v) VALUES ('b', '2')"]`)
	s.expect(t, `{"change":["insert",1,["a","1"],1]}`, `{"change":["insert",2,["b","2"],2]}`)
	n.Close()

	eng, err := crdt.Open(context.Background(), cfg.DBPath, testSchemaSQL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := eng.Exec(context.Background(), []crdt.Stmt{{Query: "UPDATE kv SET v = '10' WHERE k = 'a'"}, {Query: "DELETE FROM kv WHERE k = 'b'"}}); err != nil {
		t.Fatal(err)
	}
	eng.Close()

	n, err = Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	r := openStream(t, n, "GET", "/v1/subscriptions/"+id+"?from=2", "")
	r.status(t, 200)
	r.expect(t, `{"change":["update",1,["a","10"],3]}`, `{"change":["delete",2,["b","2"],4]}`)
	exec(t, n, `["INSERT INTO kv (k, v) VALUES ('c', '3')"]`)
	r.expect(t, `{"change":["insert",3,["c","3"],5]}`)
	all := openStream(t, n, "GET", "/v1/subscriptions/"+id+"?from=0", "")
	all.expect(t, `{"columns":["k","v"]}`, `{"row":[1,["a","10"]]}`, `{"row":[3,["c","3"]]}`, `{"eoq":{"time":0,"change_id":5}}`)
}

// TestCorrosionExecResponses pins the bodies of failed and empty
// transactions: Corrosion's ExecResponse, with the error as the only field
// of its result, time 0, no version and the actor id.
func TestCorrosionExecResponses(t *testing.T) {
	n := startAPINode(t, "secret", nil)
	actor := n.Engine().Site()
	cases := []struct {
		body   string
		status int
		want   string
	}{
		{`[]`, 400, `{"results":[{"error":"at least 1 statement is required"}],"time":0,"version":null,"actor_id":"` + actor + `"}`},
		{`["INSERT INTO kv (k, v) VALUES ('a', 'x')", "INSERT INTO nope VALUES (1)"]`, 500,
			`{"results":[{"error":"SQL logic error: no such table: nope (1)"}],"time":0,"version":null,"actor_id":"` + actor + `"}`},
		{`["DROP TABLE kv"]`, 500,
			`{"results":[{"error":"schema change (DROP) is not allowed through the store API"}],"time":0,"version":null,"actor_id":"` + actor + `"}`},
	}
	for _, c := range cases {
		r := doRequest(t, n, "secret", "POST", "/v1/transactions", []byte(c.body))
		if got := bodyOf(t, r); r.StatusCode != c.status || got != c.want+"\n" {
			t.Errorf("%s:\n got  %d %s\n want %d %s", c.body, r.StatusCode, got, c.status, c.want)
		}
	}
	r := doRequest(t, n, "secret", "POST", "/v1/transactions", []byte(`["INSERT INTO kv (k, v) VALUES ('a', 'x')"]`))
	if got := timeRe.ReplaceAllString(bodyOf(t, r), `"time":0`); got != `{"results":[{"rows_affected":1,"time":0}],"time":0,"version":1,"actor_id":"`+actor+`"}`+"\n" {
		t.Errorf("success body %s", got)
	}
	r = doRequest(t, n, "secret", "GET", "/v1/health", nil)
	if got := bodyOf(t, r); got != `{"response":{"gaps":0,"members":0,"p99_lag":0,"queue_size":0,"actor_id":"`+actor+`","vector":{"`+actor+`":1}}}`+"\n" {
		t.Errorf("health body %s", got)
	}
}

// TestCorrosionHealthThresholds checks Corrosion's rule: gaps and
// max_queue are thresholds of their own; queue_size only qualifies p99_lag.
func TestCorrosionHealthThresholds(t *testing.T) {
	cases := []struct {
		query        string
		gaps, queue  int64
		lag          float64
		wantUnhealty bool
	}{
		{"", 5, 100, 9, false},
		{"gaps=4", 5, 0, 0, true},
		{"gaps=5", 5, 0, 0, false},
		{"max_queue=10", 0, 11, 0, true},
		{"max_queue=10", 0, 10, 0, false},
		{"queue_size=10", 0, 1000, 0, false}, // not a threshold on its own
		{"p99_lag=1", 0, 0, 2, true},
		{"p99_lag=1&queue_size=10", 0, 5, 2, false},
		{"p99_lag=1&queue_size=10", 0, 11, 2, true},
		{"p99_lag=1&queue_size=10", 0, 11, 0.5, false},
		{"gaps=x", 5, 0, 0, false},
	}
	for _, c := range cases {
		r, _ := http.NewRequest("GET", "/v1/health?"+c.query, nil)
		if got := parseHealthQuery(r).unhealthy(c.gaps, c.queue, c.lag); got != c.wantUnhealty {
			t.Errorf("%q gaps=%d queue=%d lag=%v: unhealthy %v, want %v", c.query, c.gaps, c.queue, c.lag, got, c.wantUnhealty)
		}
	}
	n := startAPINode(t, "secret", nil)
	r := doRequest(t, n, "secret", "GET", "/v1/health?gaps=-1&failure_status=418", nil)
	r.Body.Close()
	if r.StatusCode != 418 {
		t.Fatalf("failure_status: %d, want 418", r.StatusCode)
	}
}

// TestCorrosionParamsAndValues pins how parameters bind and values come
// back: a JSON object or a non-byte array binds as the exact text sent,
// an array of bytes (the empty one too) as a BLOB, and results keep
// '<>&' unescaped and REALs as reals.
func TestCorrosionParamsAndValues(t *testing.T) {
	n := startAPINode(t, "secret", nil)
	cases := []struct{ param, row string }{
		{`{"b": 1, "a": "<&>"}`, `["{\"b\": 1, \"a\": \"<&>\"}","text"]`},
		{`[]`, `[[],"blob"]`},
		{`[1,2,255]`, `[[1,2,255],"blob"]`},
		{`[1, 256]`, `["[1, 256]","text"]`},
		{`["12"]`, `["[\"12\"]","text"]`},
		{`true`, `[1,"integer"]`},
		{`9223372036854775807`, `[9223372036854775807,"integer"]`},
		{`9223372036854775808`, `[9.223372036854776e18,"real"]`},
		{`2.0`, `[2.0,"real"]`},
		{`0.000001`, `[1e-6,"real"]`},
		{`1.5`, `[1.5,"real"]`},
		{`null`, `[null,"null"]`},
		{`"<a&b>"`, `["<a&b>","text"]`},
	}
	for _, c := range cases {
		s := openStream(t, n, "POST", "/v1/queries", `["SELECT ?1 AS v, typeof(?1) AS t", [`+c.param+`]]`)
		s.status(t, 200)
		s.expect(t, `{"columns":["v","t"]}`, `{"row":[1,`+c.row+`]}`, `{"eoq":{"time":0}}`)
	}
	// Written and read back through a subscription: the same text.
	exec(t, n, `[["INSERT INTO kv (k, v) VALUES ('j', ?)", [{"z": [1, 2], "a": "<&>"}]]]`)
	s := openStream(t, n, "POST", "/v1/subscriptions", `["SELECT v FROM kv WHERE k = ?", ["j"]]`)
	s.expect(t, `{"columns":["v"]}`, `{"row":[1,["{\"z\": [1, 2], \"a\": \"<&>\"}"]]}`, `{"eoq":{"time":0,"change_id":0}}`)
}

// TestCorrosionDateColumnsRaw checks values in columns declared DATE,
// DATETIME or TIMESTAMP come back exactly as stored, in queries and in
// subscriptions, whatever the statement's shape.
func TestCorrosionDateColumnsRaw(t *testing.T) {
	n := startAPINode(t, "secret", func(c *Config) {
		c.SchemaSQL = testSchemaSQL + `CREATE TABLE ev (id INTEGER PRIMARY KEY NOT NULL, at TIMESTAMP, d DATE, dt DATETIME);`
	})
	exec(t, n, `["INSERT INTO ev (id, at, d, dt) VALUES (1, '2024-01-02 03:04:05', '2024-01-02', '2024-01-02T03:04:05.123Z')",
		"INSERT INTO ev (id, at, d, dt) VALUES (2, 1700000000, 'not a date', 1.5)"]`)
	rows := []string{`{"row":[1,[1,"2024-01-02 03:04:05","2024-01-02","2024-01-02T03:04:05.123Z"]]}`,
		`{"row":[2,[2,1700000000,"not a date",1.5]]}`}
	for _, q := range []string{
		`"SELECT id, at, d, dt FROM ev ORDER BY id"`,
		`"SELECT id, at, d, dt FROM ev ORDER BY id;"`,
		`"SELECT id, at, d, dt FROM ev ORDER BY id -- trailing comment"`,
		`["SELECT id, at, d, dt FROM ev WHERE id > ? ORDER BY id", [0]]`,
		`"WITH e AS (SELECT * FROM ev) SELECT id, at, d, dt FROM e ORDER BY id"`,
	} {
		s := openStream(t, n, "POST", "/v1/queries", q)
		s.status(t, 200)
		s.expect(t, `{"columns":["id","at","d","dt"]}`, rows[0], rows[1], `{"eoq":{"time":0}}`)
	}
	s := openStream(t, n, "POST", "/v1/queries", `"SELECT e.at AS \"when\", x.at FROM ev e JOIN ev x ON x.id = e.id WHERE e.id = 1"`)
	s.expect(t, `{"columns":["when","at"]}`, `{"row":[1,["2024-01-02 03:04:05","2024-01-02 03:04:05"]]}`, `{"eoq":{"time":0}}`)
	sub := openStream(t, n, "POST", "/v1/subscriptions", `"SELECT id, at FROM ev ORDER BY id"`)
	sub.expect(t, `{"columns":["id","at"]}`, `{"row":[1,[1,"2024-01-02 03:04:05"]]}`, `{"row":[2,[2,1700000000]]}`, `{"eoq":{"time":0,"change_id":0}}`)
	exec(t, n, `["UPDATE ev SET at = '2025-06-07 08:09:10+02:00' WHERE id = 2"]`)
	sub.expect(t, `{"change":["update",2,[2,"2025-06-07 08:09:10+02:00"],1]}`)
}

// TestCorrosionJoinIdentity checks a row of a JOIN subscription keeps its
// row id when a joined row changes (an update, as in Corrosion), and that
// a row's key need not be selected.
func TestCorrosionJoinIdentity(t *testing.T) {
	n := startAPINode(t, "secret", func(c *Config) {
		c.SchemaSQL = testSchemaSQL + `CREATE TABLE owners (id TEXT PRIMARY KEY NOT NULL, name TEXT);`
	})
	exec(t, n, `["INSERT INTO owners (id, name) VALUES ('o1', 'ann')", "INSERT INTO kv (k, v) VALUES ('a', 'o1')"]`)
	s := openStream(t, n, "POST", "/v1/subscriptions", `"SELECT kv.v, o.name FROM kv JOIN owners o ON o.id = kv.v"`)
	s.expect(t, `{"columns":["v","name"]}`, `{"row":[1,["o1","ann"]]}`, `{"eoq":{"time":0,"change_id":0}}`)
	exec(t, n, `["UPDATE owners SET name = 'bob' WHERE id = 'o1'"]`)
	s.expect(t, `{"change":["update",1,["o1","bob"],1]}`)
	exec(t, n, `["INSERT INTO owners (id, name) VALUES ('o2', 'cy')", "UPDATE kv SET v = 'o2' WHERE k = 'a'"]`)
	s.expect(t, `{"change":["insert",2,["o2","cy"],2]}`, `{"change":["delete",1,["o1","bob"],3]}`)

	single := openStream(t, n, "POST", "/v1/subscriptions", `"SELECT v FROM kv"`)
	single.expect(t, `{"columns":["v"]}`, `{"row":[1,["o2"]]}`, `{"eoq":{"time":0,"change_id":0}}`)
	exec(t, n, `["UPDATE kv SET v = 'o1' WHERE k = 'a'"]`)
	single.expect(t, `{"change":["update",1,["o1"],1]}`)
}
