package routeopt

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestHeadersNormalize: names become canonical and sorted, empty rules go,
// and a bad name, a header the proxy owns, a value with a line break or a
// name set twice is refused naming where.
func TestHeadersNormalize(t *testing.T) {
	h, err := (&Headers{Request: &HeaderRules{Set: map[string]string{"x-env": "prod"}, Remove: []string{"x-debug", "X-Debug", "cookie"}},
		Response: &HeaderRules{}}).Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if h.Response != nil || h.Request.Set["X-Env"] != "prod" || !slices.Equal(h.Request.Remove, []string{"Cookie", "X-Debug"}) {
		t.Fatalf("normalized %+v %+v", h.Request, h.Response)
	}
	if none, err := (&Headers{Request: &HeaderRules{}}).Normalize(); none != nil || err != nil {
		t.Fatalf("rules without any: %+v %v", none, err)
	}
	for name, c := range map[string]struct {
		h    Headers
		want string
	}{
		"bad name":    {Headers{Request: &HeaderRules{Set: map[string]string{"X Env": "1"}}}, `request.set: "X Env" is not a header name`},
		"host":        {Headers{Request: &HeaderRules{Remove: []string{"host"}}}, "request.remove: Host is the proxy's to set"},
		"forwarded":   {Headers{Request: &HeaderRules{Set: map[string]string{"X-Forwarded-For": "1.2.3.4"}}}, "X-Forwarded-For is the proxy's"},
		"line break":  {Headers{Response: &HeaderRules{Set: map[string]string{"X-A": "a\r\nSet-Cookie: b"}}}, "response.set.X-A: the value holds a line break"},
		"twice":       {Headers{Response: &HeaderRules{Set: map[string]string{"x-a": "1", "X-A": "2"}}}, "response.set: X-A is set twice"},
		"empty name":  {Headers{Response: &HeaderRules{Remove: []string{""}}}, "response.remove: a header name is empty"},
		"transfer-en": {Headers{Response: &HeaderRules{Remove: []string{"transfer-encoding"}}}, "Transfer-Encoding is the proxy's"},
	} {
		if _, err := c.h.Normalize(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestHeaderRulesApply: removes first, then sets replace every value.
func TestHeaderRulesApply(t *testing.T) {
	h := http.Header{"X-Debug": {"1"}, "X-Env": {"dev", "test"}, "Keep": {"k"}}
	(&HeaderRules{Set: map[string]string{"X-Env": "prod"}, Remove: []string{"X-Debug"}}).Apply(h)
	if len(h) != 2 || h.Get("X-Debug") != "" || !slices.Equal(h["X-Env"], []string{"prod"}) || h.Get("Keep") != "k" {
		t.Fatalf("headers %v", h)
	}
	(*HeaderRules)(nil).Apply(h) // no rules: nothing happens
}

// TestBasicAuth: users need bcrypt hashes; Allows compares the password
// with the user's hash; Redacted keeps names only.
func TestBasicAuth(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	a := &BasicAuth{Realm: "staff", Users: map[string]string{"alice": string(hash)}}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	if !a.Allows("alice", "s3cret") || a.Allows("alice", "wrong") || a.Allows("bob", "s3cret") || a.Allows("", "") {
		t.Fatal("Allows admits the wrong credentials or refuses the right ones")
	}
	if r := a.Redacted(); r.Realm != "staff" || len(r.Users) != 1 || r.Users["alice"] != "" || a.Users["alice"] == "" {
		t.Fatalf("redacted %+v (original %+v)", r, a)
	}
	for name, c := range map[string]struct {
		a    BasicAuth
		want string
	}{
		"no users":      {BasicAuth{}, "users: none"},
		"plain text":    {BasicAuth{Users: map[string]string{"alice": "s3cret"}}, "users.alice: not a bcrypt hash"},
		"other hash":    {BasicAuth{Users: map[string]string{"alice": "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="}}, "users.alice: not a bcrypt hash"},
		"colon in name": {BasicAuth{Users: map[string]string{"a:b": string(hash)}}, `users: "a:b" is not a user name`},
		"quote realm":   {BasicAuth{Realm: `a"b`, Users: map[string]string{"alice": string(hash)}}, "realm:"},
	} {
		if err := c.a.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if (*BasicAuth)(nil).Check() != nil || (*BasicAuth)(nil).Redacted() != nil {
		t.Fatal("no basic auth is not an error and redacts to nothing")
	}
}

// TestCheckUpstreamProtocol: http1 is the default (""), grpc is h2c, and
// anything else is refused naming the value.
func TestCheckUpstreamProtocol(t *testing.T) {
	for in, want := range map[string]string{"": "", "http1": "", "HTTP/1.1": "", "h2c": UpstreamH2C, "gRPC": UpstreamH2C} {
		if got, err := CheckUpstreamProtocol(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := CheckUpstreamProtocol("h2"); err == nil || !strings.Contains(err.Error(), `"h2"`) {
		t.Errorf("h2: %v, want refused (upstreams are reached without TLS)", err)
	}
}
