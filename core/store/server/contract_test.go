package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func startAPINode(t *testing.T, token string, tweak func(*Config)) *Node {
	t.Helper()
	cfg := Config{
		DBPath:    filepath.Join(t.TempDir(), "store.db"),
		SchemaSQL: testSchemaSQL,
		APIAddr:   "127.0.0.1:0",
		Token:     token,
		NoAuth:    token == "",
		Log:       testLogger(),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

type fixtureStep struct {
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Body       json.RawMessage   `json:"body"`
	Status     int               `json:"status"`
	Headers    []string          `json:"headers"`
	JSON       json.RawMessage   `json:"json"`
	NDJSON     []json.RawMessage `json:"ndjson"`
	Then       []json.RawMessage `json:"then"`
	ThenNDJSON []json.RawMessage `json:"then_ndjson"`
}

// normalize zeroes timings and replaces run-specific ids so fixtures can
// pin everything else byte for byte.
func normalize(t *testing.T, raw []byte, repl map[string]string) string {
	t.Helper()
	s := string(raw)
	for from, to := range repl {
		if from != "" {
			s = strings.ReplaceAll(s, from, to)
		}
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %s: %v", s, err)
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if k == "time" {
					x[k] = 0
					continue
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	out, _ := json.Marshal(v)
	return string(out)
}

func doRequest(t *testing.T, n *Node, token, method, path string, body []byte) *http.Response {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, "http://"+n.APIAddr()+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestContractFixtures replays testdata/*.json against a fresh node and
// compares status, headers and bodies with the pinned Corrosion shapes.
func TestContractFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var fx struct{ Steps []fixtureStep }
			if err := json.Unmarshal(data, &fx); err != nil {
				t.Fatal(err)
			}
			n := startAPINode(t, "secret", nil)
			repl := map[string]string{n.Engine().Site(): "<actor>"}
			subID := ""
			for i, st := range fx.Steps {
				path := strings.ReplaceAll(st.Path, "<sub>", subID)
				resp := doRequest(t, n, "secret", st.Method, path, st.Body)
				if resp.StatusCode != st.Status {
					b := new(bytes.Buffer)
					b.ReadFrom(resp.Body)
					t.Fatalf("step %d %s %s: status %d want %d: %s", i, st.Method, path, resp.StatusCode, st.Status, b)
				}
				for _, h := range st.Headers {
					if resp.Header.Get(h) == "" {
						t.Errorf("step %d: missing header %s", i, h)
					}
				}
				if id := resp.Header.Get("corro-query-id"); id != "" {
					subID = id
					repl[id] = "<sub>"
				}
				if st.JSON != nil {
					b := new(bytes.Buffer)
					b.ReadFrom(resp.Body)
					if got, want := normalize(t, b.Bytes(), repl), normalize(t, st.JSON, nil); got != want {
						t.Errorf("step %d %s %s:\n got  %s\n want %s", i, st.Method, path, got, want)
					}
				}
				rd := bufio.NewReader(resp.Body)
				readLines := func(want []json.RawMessage) {
					for j, w := range want {
						line, err := readLineTimeout(rd, 5*time.Second)
						if err != nil {
							t.Fatalf("step %d line %d: %v", i, j, err)
						}
						if got, want := normalize(t, line, repl), normalize(t, w, nil); got != want {
							t.Errorf("step %d line %d:\n got  %s\n want %s", i, j, got, want)
						}
					}
				}
				readLines(st.NDJSON)
				// Each write is followed by its event before the next write:
				// a subscription may merge writes that land in one recompute.
				if len(st.Then) != len(st.ThenNDJSON) {
					t.Fatalf("step %d: %d writes but %d expected events", i, len(st.Then), len(st.ThenNDJSON))
				}
				for j, stmts := range st.Then {
					r := doRequest(t, n, "secret", "POST", "/v1/transactions", stmts)
					if r.StatusCode != 200 {
						t.Fatalf("step %d: then %s: status %d", i, stmts, r.StatusCode)
					}
					r.Body.Close()
					readLines(st.ThenNDJSON[j : j+1])
				}
				resp.Body.Close()
			}
		})
	}
}

func readLineTimeout(rd *bufio.Reader, d time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := rd.ReadBytes('\n')
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(d):
		return nil, context.DeadlineExceeded
	}
}
