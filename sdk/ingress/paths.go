package ingress

import (
	"fmt"
	"strings"
)

// HTTP routes are a hostname and a path prefix. Every ingress honours the
// same matching, so a route means the same on every Machine:
//
//   - A hostname is a name (app.example.com) or a wildcard whose first
//     label is "*" (*.example.com): the wildcard matches exactly one
//     label in its place (a.example.com, not example.com nor
//     a.b.example.com). A request's exact hostname is tried before the
//     wildcard that covers it.
//   - A path is a prefix matched on whole segments: /api matches /api,
//     /api/ and /api/users, never /apis. The empty path (written "/" or
//     left out) matches every request. Among a hostname's routes the
//     longest matching path wins.
//   - A route that strips its prefix hands the upstream the rest of the
//     path (/api/users becomes /users, /api becomes /).
//
// Paths are matched on the cleaned request path (path.Clean: "." and ".."
// segments resolved, repeated slashes folded), so /api/../admin is /admin.

// MaxPathLength bounds a route's path.
const MaxPathLength = 512

// CheckHostPattern normalises an HTTP route's hostname (lowercase, no
// final dot) and checks it: a hostname as ValidHostname wants, or a
// wildcard "*." followed by one with at least two labels. Errors say what
// is wrong with the value, for the caller to name its field.
func CheckHostPattern(h string) (string, error) {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	rest, wild := strings.CutPrefix(h, "*.")
	if !wild {
		if strings.Contains(h, "*") {
			return "", fmt.Errorf("%q has a wildcard outside its first label (want *.example.com)", h)
		}
		return h, ValidHostname(h)
	}
	if strings.Contains(rest, "*") {
		return "", fmt.Errorf("%q has more than one wildcard (want *.example.com)", h)
	}
	if err := ValidHostname(rest); err != nil {
		return "", fmt.Errorf("wildcard %q: %w", h, err)
	}
	return h, nil
}

// CheckPath normalises an HTTP route's path prefix and checks it: "" and
// "/" are the whole hostname (""); otherwise it starts with "/", has no
// final "/" (removed), no empty, "." or ".." segment, and only the
// characters a URL path carries unescaped (letters, digits and
// -._~!$&'()+,;=:@), at most MaxPathLength long.
func CheckPath(p string) (string, error) {
	if p == "" || p == "/" {
		return "", nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%q does not start with /", p)
	}
	p = strings.TrimSuffix(p, "/")
	if len(p) > MaxPathLength {
		return "", fmt.Errorf("is longer than %d characters", MaxPathLength)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return "", fmt.Errorf("%q has an empty segment (//)", p)
		case ".", "..":
			return "", fmt.Errorf("%q has a %q segment", p, seg)
		}
		for _, r := range seg {
			if !pathChar(r) {
				return "", fmt.Errorf("%q contains %q (want letters, digits and -._~!$&'()+,;=:@ between slashes; no query, wildcard or escape)", p, r)
			}
		}
	}
	if PathMatches(p, VerifyPath) {
		return "", fmt.Errorf("%q is answered by every ingress itself (%s)", p, VerifyPath)
	}
	return p, nil
}

func pathChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~!$&'()+,;=:@", r)
}

// PathMatches reports whether prefix (a CheckPath result) matches the
// cleaned request path p on whole segments.
func PathMatches(prefix, p string) bool {
	if prefix == "" {
		return true
	}
	return strings.HasPrefix(p, prefix) && (len(p) == len(prefix) || p[len(prefix)] == '/')
}

// StripPath is p as an upstream of a route with prefix sees it when the
// route strips its prefix: the rest, always starting with "/".
func StripPath(prefix, p string) string {
	rest := strings.TrimPrefix(p, prefix)
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	return rest
}

// HostMatches reports whether pattern (a CheckHostPattern result) covers
// host (lowercase, no port or final dot). A wildcard covers a first label
// of letters, digits and '-' only, so a redirect or a log never carries a
// request's odd Host into another name.
func HostMatches(pattern, host string) bool {
	rest, wild := strings.CutPrefix(pattern, "*.")
	if !wild {
		return pattern == host
	}
	label, parent, ok := strings.Cut(host, ".")
	return ok && parent == rest && validLabel(host, label) == nil
}

// IsWildcard reports whether a route's hostname is a wildcard.
func IsWildcard(hostname string) bool { return strings.HasPrefix(hostname, "*.") }
