package dashboard

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"
)

// noRedirect is a client that shows each answer as it comes.
func noRedirect(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestSessionBoundToBrowser: the launch URL is exchanged once for an
// HttpOnly, SameSite=Strict cookie and a redirect to the clean URL; a
// second local client, without the cookie, gets no secret from
// /api/session, cannot read views, logs or events, cannot act, and
// cannot spend the launch URL again.
func TestSessionBoundToBrowser(t *testing.T) {
	src := newFake()
	s, ts := serveUnbound(t, src, time.Second)
	launch := s.LaunchURL()
	jar, _ := cookiejar.New(nil)
	browser := noRedirect(jar)
	r, err := browser.Get(launch)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Fatalf("launch: %s to %q, want 303 to /", r.Status, r.Header.Get("Location"))
	}
	cs := r.Cookies()
	if len(cs) != 1 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" {
		t.Fatalf("session cookie %+v, want one HttpOnly SameSite=Strict cookie", cs)
	}
	var sess map[string]string
	if code := getJSON(t, browser, ts.URL+"/api/session", &sess); code != 200 || sess["token"] != s.bind.csrf {
		t.Fatalf("the bound browser's session: %d %v", code, sess)
	}

	other := noRedirect(nil)
	secrets := []string{s.bind.csrf, cs[0].Value, strings.TrimPrefix(launch, ts.URL+"/?launch=")}
	check := func(what string, r *http.Response, err error, codes ...int) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != codes[0] && (len(codes) < 2 || r.StatusCode != codes[1]) {
			t.Errorf("%s without the cookie: %s, want %v", what, r.Status, codes)
		}
		if len(r.Cookies()) != 0 {
			t.Errorf("%s without the cookie set cookies %v", what, r.Cookies())
		}
		for _, sec := range secrets {
			if strings.Contains(string(b), sec) || strings.Contains(r.Header.Get("Location"), sec) {
				t.Errorf("%s without the cookie leaked a secret: %s", what, b)
			}
		}
	}
	for _, path := range []string{"/api/session", "/api/view/cluster", "/api/events?view=services", "/api/logs?namespace=app-prod&service=web",
		"/api/metrics?range=1h&namespace=app-prod&service=web", "/", "/app.js"} {
		r, err := other.Get(ts.URL + path)
		check("GET "+path, r, err, http.StatusUnauthorized)
	}
	for _, verb := range []string{"scale", "restart", "stop", "start"} {
		// Even the right CSRF token does not stand in for the cookie.
		req, _ := http.NewRequest("POST", ts.URL+"/api/"+verb, strings.NewReader(`{"namespace":"app-prod","service":"web","replicas":0}`))
		req.Header.Set(TokenHeader, s.bind.csrf)
		r, err := other.Do(req)
		check("POST /api/"+verb, r, err, http.StatusUnauthorized, http.StatusForbidden)
	}
	// The launch URL is spent: a second client cannot use it, and a wrong
	// token gets nothing either.
	r, err = other.Get(launch)
	check("the spent launch URL", r, err, http.StatusUnauthorized)
	r, err = other.Get(ts.URL + "/?launch=" + strings.Repeat("0", 64))
	check("a wrong launch token", r, err, http.StatusUnauthorized)
	if s.LaunchURL() == launch {
		t.Error("LaunchURL still offers the spent token")
	}
	if len(src.scales) != 0 || src.restarts != 0 || len(src.stopped) != 0 {
		t.Fatalf("refused actions ran: %v %d %v", src.scales, src.restarts, src.stopped)
	}
	// The bound browser reopening its link is sent on, still bound.
	r, err = browser.Get(launch)
	if err != nil || r.StatusCode != http.StatusSeeOther || len(r.Cookies()) != 0 {
		t.Fatalf("the bound browser reopening its link: %v %v", r, err)
	}
	r.Body.Close()
	if code, a := post(t, browser, ts.URL+"/api/stop", sess["token"], `{"namespace":"app-prod","service":"web"}`); code != 200 || len(src.stopped) != 1 {
		t.Fatalf("the bound browser's stop: %d %v", code, a)
	}
}
