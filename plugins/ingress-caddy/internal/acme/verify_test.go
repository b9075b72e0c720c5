package acme

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ployz/ployz/sdk/ingress"
)

// The hostname check passes only when /.ployz-verify answers the nonce
// it sent keyed by one of the Cluster's Machine ids, and says why
// otherwise without naming the host. A replayed answer does not pass.
func TestVerifyHostname(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.ployz-verify" {
			http.NotFound(w, r)
			return
		}
		n := r.URL.Query().Get("n")
		if len(n) < 32 {
			t.Errorf("verify nonce %q, want 16 random bytes", n)
		}
		w.Write([]byte(ingress.VerifyAnswer("m-b", n) + "\n"))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	if err := VerifyHostname(t.Context(), host, []string{"m-a", "m-b"}); err != nil {
		t.Fatal(err)
	}
	if err := VerifyHostname(t.Context(), host, []string{"m-a"}); err == nil || !strings.Contains(err.Error(), "reaches elsewhere") {
		t.Fatalf("foreign Machine: %v", err)
	}
	if err := VerifyHostname(t.Context(), "nothing.invalid", []string{"m-a"}); err == nil || strings.Contains(err.Error(), "nothing.invalid") {
		t.Fatalf("unresolvable: %v", err)
	}
	// A host replaying one answer it copied from a Machine, or answering
	// the bare id as before, reaches elsewhere.
	for _, body := range []string{ingress.VerifyAnswer("m-b", "a-nonce-seen-once"), "m-b"} {
		replay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body + "\n")) }))
		err := VerifyHostname(t.Context(), strings.TrimPrefix(replay.URL, "http://"), []string{"m-b"})
		replay.Close()
		if err == nil || !strings.Contains(err.Error(), "reaches elsewhere") {
			t.Fatalf("answering %q: %v", body, err)
		}
	}
}
