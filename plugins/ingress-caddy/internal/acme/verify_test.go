package acme

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The hostname check passes only when /.ployz-verify answers one of the
// Cluster's Machine ids, and says why otherwise without naming the host.
func TestVerifyHostname(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.ployz-verify" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("m-b\n"))
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
}
