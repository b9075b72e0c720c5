package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/store"
	"golang.org/x/crypto/bcrypt"
)

// echoBackend answers "NAME METHOD URI PREFIX BODY": which backend, the
// request line it received and its X-Forwarded-Prefix.
func echoBackend(t *testing.T, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s %s %s", name, r.Method, r.URL.RequestURI(), r.Header.Get("X-Forwarded-Prefix"), b)
	}))
	t.Cleanup(s.Close)
	return s
}

// routeRow is a ready Container row of service in namespace demo behind
// backend, declaring routes.
func routeRow(key, service string, backend *httptest.Server, routes ...store.IngressRoute) store.Row[store.ContainerBody] {
	ip, port, _ := net.SplitHostPort(strings.TrimPrefix(backend.URL, "http://"))
	p, _ := strconv.Atoi(port)
	for i := range routes {
		routes[i].ContainerPort = p
	}
	return store.Row[store.ContainerBody]{Key: key, Owner: "m1", Body: store.ContainerBody{
		Namespace: "demo", Service: service, IP: ip, Ready: true, Ingress: routes}}
}

// request sends method path with Host host to listen, following no
// redirect, and returns the status, the Location and the body.
func request(t *testing.T, method, listen, host, path, header string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+listen+path, strings.NewReader("payload"))
	req.Host = host
	if header != "" {
		req.Header.Set("X-Forwarded-Prefix", header)
	}
	c := &http.Client{Timeout: 3 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, host, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// TestServePathRoutesRealCaddy runs Serve (embedded Caddy, routes from a
// store source) in front of five Services that share hostnames: paths
// route by longest whole-segment prefix of the cleaned path, a stripping
// route hands the rest of the path and its prefix (X-Forwarded-Prefix,
// never the client's), a wildcard answers one label under it after the
// exact hostname's routes, and a hostname whose paths do not match is 404.
func TestServePathRoutesRealCaddy(t *testing.T) {
	site, api, v2, wild, exact := echoBackend(t, "site"), echoBackend(t, "api"), echoBackend(t, "v2"), echoBackend(t, "wild"), echoBackend(t, "exact")
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{
		routeRow("c-site", "site", site, store.IngressRoute{Hostname: "a.example.test"}),
		routeRow("c-api", "api", api, store.IngressRoute{Hostname: "a.example.test", Path: "/api", Options: routeopt.Options{StripPrefix: true}}),
		routeRow("c-v2", "v2", v2, store.IngressRoute{Hostname: "a.example.test", Path: "/api/v2"}),
		routeRow("c-wild", "wild", wild, store.IngressRoute{Hostname: "*.example.test"}),
		routeRow("c-exact", "exact", exact, store.IngressRoute{Hostname: "c.example.test", Path: "/only"}),
	}, nil)
	listen := freePort(t)
	loads := serveSpec(t, listen, src)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 5 })

	for _, c := range []struct{ host, path, header, want string }{
		{"a.example.test", "/", "", "site GET /  payload"},
		{"a.example.test", "/apis", "", "site GET /apis  payload"},
		{"a.example.test", "/api", "", "api GET / /api payload"},
		{"a.example.test", "/api/users?page=2", "/evil", "api GET /users?page=2 /api payload"},
		{"a.example.test", "/api/users/", "", "api GET /users/ /api payload"},
		{"a.example.test", "/api/v2/x", "", "v2 GET /api/v2/x  payload"},
		{"a.example.test", "/api/v2x", "", "api GET /v2x /api payload"},
		{"a.example.test", "/x/../api/v2", "/evil", "v2 GET /x/../api/v2  payload"},
		{"b.example.test", "/anything", "", "wild GET /anything  payload"},
		{"C.Example.Test", "/only/1", "", "exact GET /only/1  payload"},
		{"c.example.test", "/", "", "wild GET /  payload"},
	} {
		code, _, body := request(t, "GET", listen, c.host, c.path, c.header)
		if code != 200 || body != c.want {
			t.Errorf("%s%s: %d %q, want 200 %q", c.host, c.path, code, body, c.want)
		}
	}
	if code, _, body := request(t, "POST", listen, "a.example.test", "/api/echo", ""); code != 200 || body != "api POST /echo /api payload" {
		t.Errorf("POST through a stripping route: %d %q", code, body)
	}
	for _, host := range []string{"deep.b.example.test", "example.test", "other.test"} {
		if code, _, _ := request(t, "GET", listen, host, "/", ""); code != 404 {
			t.Errorf("%s: %d, want 404", host, code)
		}
	}
}

// TestRedirectHTTPSRealCaddy loads CaddyConfigTLS with a certificate for
// a.test into Caddy: HTTP requests for a.test are redirected with 308 to
// the same URI on the HTTPS port (method and body kept there), except on
// a route that opts out, for the ACME challenge and /.ployz-verify; a
// hostname without a certificate keeps HTTP; HTTPS itself never
// redirects.
func TestRedirectHTTPSRealCaddy(t *testing.T) {
	backend := echoBackend(t, "app")
	up := backend.Listener.Addr().String()
	certPEM, keyPEM, der := testCert("a.test")
	httpAddr, tlsAddr := freePort(t), freePort(t)
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	no := false
	routes := []ingress.Route{
		{Hostname: "a.test", Owner: "p/web", State: "published", Upstreams: []string{up}},
		{Hostname: "a.test", Path: "/legacy", Options: routeopt.Options{RedirectHTTPS: &no}, Owner: "p/legacy", State: "published", Upstreams: []string{up}},
		{Hostname: "b.test", Owner: "p/b", State: "published", Upstreams: []string{up}},
	}
	in := caddyconfig.TLS{Listen: tlsAddr, HTTPSPort: must(strconv.Atoi(tlsPort)),
		Certificates: []caddyconfig.Certificate{{CertPEM: certPEM, KeyPEM: keyPEM, Hostname: "a.test"}},
		Challenges:   []caddyconfig.Challenge{{Hostname: "a.test", Token: "tok_1", KeyAuthorization: "tok_1.thumb"}}}
	loadTLS(t, httpAddr, routes, in)

	code, loc, _ := request(t, "POST", httpAddr, "A.test", "/orders/7?x=1&y=%2F", "")
	if want := "https://a.test:" + tlsPort + "/orders/7?x=1&y=%2F"; code != http.StatusPermanentRedirect || loc != want {
		t.Fatalf("http a.test: %d %q, want 308 to %s", code, loc, want)
	}
	for _, c := range []struct{ host, path, want string }{
		{"a.test", "/legacy/page", "app GET /legacy/page  payload"},
		{"b.test", "/", "app GET /  payload"},
		{"a.test", "/.well-known/acme-challenge/tok_1", "tok_1.thumb"},
	} {
		if code, _, body := request(t, "GET", httpAddr, c.host, c.path, ""); code != 200 || body != c.want {
			t.Errorf("http %s%s: %d %q, want 200 %q", c.host, c.path, code, body, c.want)
		}
	}
	if code, _, body := request(t, "GET", httpAddr, "a.test", "/.ployz-verify?n=abc", ""); code != 200 || strings.TrimSpace(body) != ingress.VerifyAnswer("m1", "abc") {
		t.Errorf("verify on a redirected hostname: %d %q", code, body)
	}

	// The redirect's target answers the same request over HTTPS.
	u, _ := url.Parse(loc)
	req, _ := http.NewRequest("POST", u.String(), strings.NewReader("payload"))
	resp, err := httpsClient(der, tlsAddr).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "app POST /orders/7?x=1&y=%2F  payload" {
		t.Fatalf("https after the redirect: %d %q", resp.StatusCode, b)
	}
}

// TestServeRouteOptionsRealCaddy runs Serve (embedded Caddy, routes from a
// store source) with routes that use every per-route option: basic
// authentication (401 asking for it, 200 with a user's password), a body
// limit (413 by Content-Length and while a chunked body streams), a
// response timeout (504 when no headers come in time; a body that streams
// after its headers is not cut) and header rules on the request the
// Container gets and the answer the client gets. The status file shows
// the users without their hashes.
func TestServeRouteOptionsRealCaddy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/slow":
			time.Sleep(2 * time.Second)
		case "/stream":
			w.WriteHeader(200)
			for i := 0; i < 4; i++ {
				fmt.Fprint(w, "tick ")
				w.(http.Flusher).Flush()
				time.Sleep(200 * time.Millisecond)
			}
			return
		}
		w.Header().Set("X-Internal", "secret")
		w.Header().Set("Server", "backend/1.0")
		fmt.Fprintf(w, "env=%s debug=%s len=%d", r.Header.Get("X-Env"), r.Header.Get("X-Debug"), len(b))
	}))
	t.Cleanup(backend.Close)
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{
		routeRow("c-auth", "auth", backend, store.IngressRoute{Hostname: "auth.example.test",
			Options: routeopt.Options{BasicAuth: &routeopt.BasicAuth{Realm: "staff", Users: map[string]string{"alice": string(hash)}}}}),
		routeRow("c-limit", "limit", backend, store.IngressRoute{Hostname: "limit.example.test", Options: routeopt.Options{MaxBodyBytes: 16}}),
		routeRow("c-slow", "slow", backend, store.IngressRoute{Hostname: "slow.example.test", Options: routeopt.Options{ResponseTimeoutMS: 300}}),
		routeRow("c-hdr", "hdr", backend, store.IngressRoute{Hostname: "hdr.example.test", Options: routeopt.Options{Headers: &routeopt.Headers{
			Request:  &routeopt.HeaderRules{Set: map[string]string{"X-Env": "prod"}, Remove: []string{"X-Debug"}},
			Response: &routeopt.HeaderRules{Set: map[string]string{"X-Frame-Options": "DENY"}, Remove: []string{"X-Internal", "Server"}}}}}),
	}, nil)
	listen := freePort(t)
	spec := writeSpec(t, listen)
	loads, done, cancel := startServe(spec, src)
	t.Cleanup(func() { cancel(); <-done })
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 4 })
	c := &http.Client{Timeout: 5 * time.Second}
	do := func(req *http.Request) (*http.Response, string) {
		t.Helper()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", req.Method, req.Host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	req := func(method, host, path string, body io.Reader) *http.Request {
		r, _ := http.NewRequest(method, "http://"+listen+path, body)
		r.Host = host
		return r
	}

	if resp, _ := do(req("GET", "auth.example.test", "/", nil)); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Basic realm="staff", charset="UTF-8"` {
		t.Errorf("no credentials: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	wrong := req("GET", "auth.example.test", "/", nil)
	wrong.SetBasicAuth("alice", "nope")
	if resp, _ := do(wrong); resp.StatusCode != 401 {
		t.Errorf("wrong password: %d", resp.StatusCode)
	}
	for i := 0; i < 2; i++ { // the second is admitted from the cache
		right := req("GET", "auth.example.test", "/", nil)
		right.SetBasicAuth("alice", "pw")
		if resp, body := do(right); resp.StatusCode != 200 || !strings.HasPrefix(body, "env=") {
			t.Errorf("right password (%d): %d %q", i, resp.StatusCode, body)
		}
	}

	if resp, body := do(req("POST", "limit.example.test", "/", strings.NewReader("sixteen bytes!!!"))); resp.StatusCode != 200 || !strings.HasSuffix(body, "len=16") {
		t.Errorf("a body at the limit: %d %q", resp.StatusCode, body)
	}
	if resp, body := do(req("POST", "limit.example.test", "/", strings.NewReader("seventeen bytes!!"))); resp.StatusCode != 413 || !strings.Contains(body, "over") {
		t.Errorf("a declared body over the limit: %d %q", resp.StatusCode, body)
	}
	chunked := req("POST", "limit.example.test", "/", io.MultiReader(strings.NewReader(strings.Repeat("x", 10)), strings.NewReader(strings.Repeat("y", 90))))
	if resp, body := do(chunked); resp.StatusCode != 413 || chunked.ContentLength != -1 && chunked.ContentLength != 0 {
		t.Errorf("a chunked body over the limit: %d %q (length %d)", resp.StatusCode, body, chunked.ContentLength)
	}

	start := time.Now()
	if resp, body := do(req("GET", "slow.example.test", "/slow", nil)); resp.StatusCode != 504 || !strings.Contains(body, "response_timeout") || time.Since(start) > 1500*time.Millisecond {
		t.Errorf("no headers within the timeout: %d %q after %s", resp.StatusCode, body, time.Since(start))
	}
	if resp, body := do(req("GET", "slow.example.test", "/stream", nil)); resp.StatusCode != 200 || body != "tick tick tick tick " {
		t.Errorf("a body streaming past the timeout after its headers: %d %q", resp.StatusCode, body)
	}

	h := req("GET", "hdr.example.test", "/", nil)
	h.Header.Set("X-Env", "dev")
	h.Header.Set("X-Debug", "1")
	resp, body := do(h)
	if resp.StatusCode != 200 || body != "env=prod debug= len=0" {
		t.Errorf("request header rules: %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Internal") != "" || resp.Header.Get("Server") != "" {
		t.Errorf("response header rules: %v", resp.Header)
	}

	st := readStatus(t, filepath.Join(filepath.Dir(spec), "status.json"))
	i := slices.IndexFunc(st.Routes, func(r ingress.Route) bool { return r.Hostname == "auth.example.test" })
	if i < 0 || st.Routes[i].BasicAuth == nil || len(st.Routes[i].BasicAuth.Users) != 1 {
		t.Fatalf("status routes %+v: want auth.example.test's users", st.Routes)
	}
	if a, ok := st.Routes[i].BasicAuth.Users["alice"]; !ok || a != "" {
		t.Errorf("status shows alice as %q, %v: want her name without her hash", a, ok)
	}
}
