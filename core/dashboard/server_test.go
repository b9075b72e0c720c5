package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func getJSON(t *testing.T, c *http.Client, url string, out any) int {
	t.Helper()
	r, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if err := json.NewDecoder(r.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return r.StatusCode
}

func TestViews(t *testing.T) {
	_, ts := serve(t, newFake(), time.Second)
	var c Cluster
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/cluster", &c); code != 200 || len(c.Machines) != 3 || c.Machines[2].DrainedSince == "" || c.Machines[0].Plugins[0].Name != "logstore" {
		t.Fatalf("cluster %d %+v", code, c)
	}
	var s Services
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/services", &s); code != 200 || len(s.Services) != 2 || s.Services[0].Ingress != "published" {
		t.Fatalf("services %d %+v", code, s)
	}
	var sv Service
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/service?namespace=app-prod&service=web", &sv); code != 200 || sv.Serving.Pointer != "p7" || len(sv.Containers) != 2 {
		t.Fatalf("service %d %+v", code, sv)
	}
	var d deploysPage
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/deploys", &d); code != 200 || d.Revisions[0].Revision != 3 || d.Actions == nil {
		t.Fatalf("deploys %d %+v", code, d)
	}
	for url, field := range map[string]string{"/api/view/nope": "view", "/api/view/service?service=web": "namespace", "/api/view/service?namespace=a": "service",
		"/api/metrics?range=7y": "range", "/api/logs?namespace=app-prod": "service"} {
		var fe FieldError
		if code := getJSON(t, ts.Client(), ts.URL+url, &fe); code != 400 || fe.Field != field {
			t.Errorf("GET %s: %d %+v, want 400 naming %s", url, code, fe, field)
		}
	}
	var e map[string]string
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/service?namespace=app-prod&service=db", &e); code != 502 || !strings.Contains(e["error"], "no Container") {
		t.Errorf("a Source error: %d %v", code, e)
	}
}

func TestAssetsAndHeaders(t *testing.T) {
	_, ts := serve(t, newFake(), time.Second)
	for path, want := range map[string]string{"/": "<main id=\"view\"", "/app.js": "EventSource", "/style.css": "prefers-color-scheme", "/vendor/uPlot.iife.min.js": "uPlot"} {
		r, err := ts.Client().Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, lacks %q", path, r.StatusCode, want)
		}
		csp := r.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") ||
			r.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: headers %v", path, r.Header)
		}
	}
}

func TestForeignHostRefused(t *testing.T) {
	src := newFake()
	s, ts := serve(t, src, time.Second)
	for _, path := range []string{"/", "/api/session", "/api/view/cluster"} {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Host = "attacker.example:" + strings.Split(ts.Listener.Addr().String(), ":")[1]
		r, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusMisdirectedRequest || strings.Contains(string(b), s.bind.csrf) {
			t.Errorf("GET %s with a foreign Host: %d %s", path, r.StatusCode, b)
		}
	}
	// A rebinding page cannot act even with the right token.
	req, _ := http.NewRequest("POST", ts.URL+"/api/scale", strings.NewReader(`{"namespace":"app-prod","service":"web","replicas":0}`))
	req.Host, req.Header[TokenHeader] = "attacker.example", []string{s.bind.csrf}
	if r, err := ts.Client().Do(req); err != nil || r.StatusCode != http.StatusMisdirectedRequest || len(src.scales) != 0 {
		t.Fatalf("foreign POST: %v %v scales %v", r, err, src.scales)
	}
	// localhost on the same port is the same dashboard (the cookie is
	// sent by hand: a jar keeps it for the host that set it).
	req, _ = http.NewRequest("GET", ts.URL+"/api/session", nil)
	req.Host = "localhost:" + strings.Split(ts.Listener.Addr().String(), ":")[1]
	for _, c := range ts.Client().Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
		t.Fatalf("localhost Host: %v %v", r, err)
	}
}

func post(t *testing.T, c *http.Client, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(r.Body).Decode(&out)
	return r.StatusCode, out
}

func TestActionsNeedToken(t *testing.T) {
	src := newFake()
	_, ts := serve(t, src, time.Second)
	body := `{"namespace":"app-prod","service":"web","replicas":3}`
	for _, tok := range []string{"", "0000", strings.Repeat("a", 64)} {
		if code, _ := post(t, ts.Client(), ts.URL+"/api/scale", tok, body); code != http.StatusForbidden {
			t.Errorf("token %q: %d, want 403", tok, code)
		}
		for _, verb := range []string{"restart", "stop", "start"} {
			if code, _ := post(t, ts.Client(), ts.URL+"/api/"+verb, tok, `{"namespace":"app-prod","service":"web"}`); code != http.StatusForbidden {
				t.Errorf("%s with token %q: %d, want 403", verb, tok, code)
			}
		}
	}
	if len(src.scales) != 0 || src.restarts != 0 || len(src.stopped) != 0 {
		t.Fatalf("refused actions ran: %v %d", src.scales, src.restarts)
	}
	var sess map[string]string
	getJSON(t, ts.Client(), ts.URL+"/api/session", &sess)
	code, a := post(t, ts.Client(), ts.URL+"/api/scale", sess["token"], body)
	if code != 200 || a["status"] != "completed" || !strings.Contains(a["output"].(string), "scale web to 3") || len(src.scales) != 1 {
		t.Fatalf("scale with the token: %d %v", code, a)
	}
	if code, a := post(t, ts.Client(), ts.URL+"/api/restart", sess["token"], `{"namespace":"app-prod","service":"web"}`); code != 200 || src.restarts != 1 {
		t.Fatalf("restart with the token: %d %v", code, a)
	}
	// Stop and start need no Saved State: the undeclared stray may stop.
	if code, a := post(t, ts.Client(), ts.URL+"/api/stop", sess["token"], `{"namespace":"app-prod","service":"stray"}`); code != 200 || len(src.stopped) != 1 || src.stopped[0] != "stop app-prod/stray" {
		t.Fatalf("stop with the token: %d %v %v", code, a, src.stopped)
	}
	var d deploysPage
	getJSON(t, ts.Client(), ts.URL+"/api/view/deploys", &d)
	if len(d.Actions) != 3 || d.Actions[0].Kind != "stop" || d.Actions[1].Kind != "restart" || d.Actions[2].Status != "completed" || *d.Actions[2].Replicas != 3 {
		t.Fatalf("action log %+v", d.Actions)
	}
}

func TestScaleValidated(t *testing.T) {
	src := newFake()
	s, ts := serve(t, src, time.Second)
	cases := map[string]string{
		`{"namespace":"app-prod","service":"web","replicas":"two"}`: "replicas",
		`{"namespace":"app-prod","service":"web","replicas":1.5}`:   "replicas",
		`{"namespace":"app-prod","service":"web","replicas":-1}`:    "replicas",
		`{"namespace":"app-prod","service":"web","replicas":101}`:   "replicas",
		`{"namespace":"app-prod","service":"web"}`:                  "replicas",
		`{"service":"web","replicas":1}`:                            "namespace",
		`{"namespace":"app-prod","replicas":1}`:                     "service",
		`{"namespace":"app-prod","service":"db","replicas":1}`:      "service",
		`{"namespace":"app-prod","service":"stray","replicas":1}`:   "service",
		`{"namespace":"app-prod","service":"web","replica":1}`:      "body",
		`not json`: "body",
	}
	for body, field := range cases {
		code, out := post(t, ts.Client(), ts.URL+"/api/scale", s.bind.csrf, body)
		if code != 400 || out["field"] != field {
			t.Errorf("%s: %d %v, want 400 naming %s", body, code, out, field)
		}
	}
	if code, out := post(t, ts.Client(), ts.URL+"/api/restart", s.bind.csrf, `{"namespace":"app-prod","service":"web","replicas":2}`); code != 400 || out["field"] != "replicas" {
		t.Errorf("restart with replicas: %d %v", code, out)
	}
	if code, out := post(t, ts.Client(), ts.URL+"/api/start", s.bind.csrf, `{"namespace":"app-prod","service":"db"}`); code != 400 || out["field"] != "service" {
		t.Errorf("start of an unknown Service: %d %v", code, out)
	}
	if len(src.scales) != 0 || len(src.stopped) != 0 {
		t.Fatalf("invalid actions ran: %v %v", src.scales, src.stopped)
	}
}

// readEvent reads one SSE event, skipping comments.
func readEvent(t *testing.T, rd *bufio.Reader) (string, string) {
	t.Helper()
	var ev, data string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			ev = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		case line == "" && ev != "":
			return ev, data
		}
	}
}

// openEvents opens an event stream for the test's length (at most 10 s).
func openEvents(t *testing.T, c *http.Client, url string) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Body.Close() })
	if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	return bufio.NewReader(r.Body)
}

func TestEventsSendChanges(t *testing.T) {
	src := newFake()
	_, ts := serve(t, src, 20*time.Millisecond)
	rd := openEvents(t, ts.Client(), ts.URL+"/api/events?view=services")
	ev, data := readEvent(t, rd)
	if ev != "view" || !strings.Contains(data, `"desired":"2"`) {
		t.Fatalf("first event %s %s", ev, data)
	}
	// Unchanged polls send nothing; a change is sent without a reload.
	start := time.Now()
	go func() {
		time.Sleep(150 * time.Millisecond)
		src.mu.Lock()
		src.replicas = 5
		src.mu.Unlock()
	}()
	ev, data = readEvent(t, rd)
	if ev != "view" || !strings.Contains(data, `"desired":"5"`) || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("second event after %v: %s %s", time.Since(start), ev, data)
	}
	var st viewState
	if err := json.Unmarshal([]byte(data), &st); err != nil || st.Error != "" {
		t.Fatalf("state %s: %v", data, err)
	}
}

func TestEventsNameBadInput(t *testing.T) {
	_, ts := serve(t, newFake(), 20*time.Millisecond)
	var fe FieldError
	if code := getJSON(t, ts.Client(), ts.URL+"/api/events", &fe); code != 400 || fe.Field != "view" {
		t.Fatalf("no view: %d %+v", code, fe)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/events?view=service&namespace=app-prod", nil)
	r, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	_, data := readEvent(t, bufio.NewReader(r.Body))
	if !strings.Contains(data, `"field":"service"`) {
		t.Fatalf("a view missing its service: %s", data)
	}
}

func TestLogsStream(t *testing.T) {
	_, ts := serve(t, newFake(), time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/logs?namespace=app-prod&service=web", nil)
	r, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	rd := bufio.NewReader(r.Body)
	var lines []LogLine
	for len(lines) < 4 {
		ev, data := readEvent(t, rd)
		var l LogLine
		if ev != "line" || json.Unmarshal([]byte(data), &l) != nil {
			t.Fatalf("event %s %s", ev, data)
		}
		lines = append(lines, l)
	}
	if lines[0].Text != "GET / 0" || lines[1].Machine != "m2" || lines[2].Error == "" || lines[3].Text != "GET / 2" {
		t.Fatalf("lines %+v", lines)
	}
}
