package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
)

// TestChallengeAnsweredOnlyForItsHostname: an HTTP-01 challenge of the
// certificates row a.example.test is answered for that Host only; asked
// with the Host of row b.example.test (which has a challenge of its own)
// or of a name with no row, it is 404, so a store writer cannot validate
// every name pointing at the Cluster. Without a challenge path the
// request still routes.
func TestChallengeAnsweredOnlyForItsHostname(t *testing.T) {
	publish(buildTable([]ingress.Route{{Hostname: "b.example.test", Owner: "demo/b", State: "pending"}}, caddyconfig.TLS{Challenges: []caddyconfig.Challenge{
		{Hostname: "a.example.test", Token: "tok_a", KeyAuthorization: "tok_a.thumb"},
		{Hostname: "b.example.test", Token: "tok_b", KeyAuthorization: "tok_b.thumb"},
		// A second row claiming a's token for b answers for b only.
		{Hostname: "b.example.test", Token: "tok_a", KeyAuthorization: "tok_a.forged"},
	}}))
	defer publish(nil)
	h := routeHandler{Challenges: true}
	get := func(host, path string) (int, string) {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "http://"+host+path, nil)
		if err := h.ServeHTTP(w, r, nil); err != nil {
			t.Fatal(err)
		}
		return w.Code, w.Body.String()
	}
	for _, c := range []struct {
		host, path string
		code       int
		body       string
	}{
		{"a.example.test", "/.well-known/acme-challenge/tok_a", http.StatusOK, "tok_a.thumb"},
		{"A.Example.Test.:80", "/.well-known/acme-challenge/tok_a", http.StatusOK, "tok_a.thumb"},
		{"b.example.test", "/.well-known/acme-challenge/tok_b", http.StatusOK, "tok_b.thumb"},
		{"a.example.test", "/.well-known/acme-challenge/tok_b", http.StatusNotFound, ""},
		{"b.example.test", "/.well-known/acme-challenge/tok_a", http.StatusOK, "tok_a.forged"},
		{"victim.example.test", "/.well-known/acme-challenge/tok_a", http.StatusNotFound, ""},
		{"b.example.test", "/.well-known/acme-challenge/unknown", http.StatusBadGateway, ""}, // not a challenge: b's pending route
	} {
		code, body := get(c.host, c.path)
		if code != c.code || (c.body != "" && body != c.body) || (c.code != http.StatusOK && (body == "tok_a.thumb" || body == "tok_b.thumb")) {
			t.Errorf("%s%s: %d %q, want %d %q", c.host, c.path, code, body, c.code, c.body)
		}
	}
}
