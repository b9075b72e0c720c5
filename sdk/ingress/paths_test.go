package ingress

import (
	"strings"
	"testing"
)

// TestPathMatching: prefixes match whole segments, the empty path every
// request, and stripping leaves a path that starts with "/".
func TestPathMatching(t *testing.T) {
	for _, c := range []struct {
		prefix, path string
		want         bool
	}{
		{"", "/", true}, {"", "/anything/at/all", true},
		{"/api", "/api", true}, {"/api", "/api/", true}, {"/api", "/api/users", true},
		{"/api", "/apis", false}, {"/api", "/ap", false}, {"/api", "/", false}, {"/api", "/v1/api", false},
		{"/api/v1", "/api/v1/x", true}, {"/api/v1", "/api/v2", false}, {"/API", "/api", false},
	} {
		if got := PathMatches(c.prefix, c.path); got != c.want {
			t.Errorf("PathMatches(%q, %q) = %v, want %v", c.prefix, c.path, got, c.want)
		}
	}
	for _, c := range [][3]string{{"/api", "/api", "/"}, {"/api", "/api/", "/"}, {"/api", "/api/users", "/users"}, {"/a/b", "/a/b/c/d", "/c/d"}} {
		if got := StripPath(c[0], c[1]); got != c[2] {
			t.Errorf("StripPath(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

// TestHostMatching: a wildcard covers exactly one label in its place.
func TestHostMatching(t *testing.T) {
	for _, c := range []struct {
		pattern, host string
		want          bool
	}{
		{"app.example.com", "app.example.com", true}, {"app.example.com", "x.example.com", false},
		{"*.example.com", "a.example.com", true}, {"*.example.com", "example.com", false},
		{"*.example.com", "a.b.example.com", false}, {"*.example.com", ".example.com", false},
		{"*.example.com", "a.example.org", false}, {"*.example.com", "aexample.com", false},
		{"*.example.com", "a-1.example.com", true}, {"*.example.com", "a/b.example.com", false},
		{"*.example.com", "a_b.example.com", false}, {"*.example.com", "-a.example.com", false},
	} {
		if got := HostMatches(c.pattern, c.host); got != c.want {
			t.Errorf("HostMatches(%q, %q) = %v, want %v", c.pattern, c.host, got, c.want)
		}
	}
}

// TestCheckRoute: hostnames and paths are normalised, or refused with a
// reason that says what is wrong.
func TestCheckRoute(t *testing.T) {
	for in, want := range map[string]string{"App.Example.COM.": "app.example.com", "*.Example.com": "*.example.com"} {
		if got, err := CheckHostPattern(in); err != nil || got != want {
			t.Errorf("CheckHostPattern(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, why := range map[string]string{"*.com": "at least two labels", "a.*.example.com": "outside its first label",
		"*.*.example.com": "more than one wildcard", "*": "outside its first label", "**.example.com": "outside its first label", "": "empty"} {
		if _, err := CheckHostPattern(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckHostPattern(%q): %v, want %q", in, err, why)
		}
	}
	for in, want := range map[string]string{"": "", "/": "", "/api": "/api", "/api/": "/api", "/a/b-c_d.e~f": "/a/b-c_d.e~f", "/@user:1": "/@user:1"} {
		if got, err := CheckPath(in); err != nil || got != want {
			t.Errorf("CheckPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, why := range map[string]string{"api": "does not start with /", "//": "empty segment", "/a//b": "empty segment",
		"/a/./b": `"." segment`, "/..": `".." segment`, "/a b": "contains", "/a?b": "contains", "/a#b": "contains",
		"/a*": "contains", "/%41": "contains", "/.ployz-verify": "answered by every ingress",
		"/" + strings.Repeat("a", MaxPathLength): "longer than"} {
		if _, err := CheckPath(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckPath(%q): %v, want %q", in, err, why)
		}
	}
}
