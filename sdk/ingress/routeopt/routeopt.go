package routeopt

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Options are what an HTTP route may ask of the ingress beyond where it
// goes; each is left out of the JSON when unset, so a route without them
// encodes (and hashes) as before they existed. Spec, row and status
// routes embed it, so their JSON carries the fields inline.
type Options struct {
	// StripPrefix: the upstream sees the path below the route's prefix.
	StripPrefix bool `json:"strip_prefix,omitempty"`
	// RedirectHTTPS false opts out of the 308 to HTTPS every route gets
	// once a certificate for its hostname is loaded; nil is the default.
	RedirectHTTPS *bool `json:"redirect_https,omitempty"`
	// MaxBodyBytes bounds request bodies (413 past it); 0: no limit.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// ResponseTimeoutMS bounds the wait for the upstream's response
	// headers (504 past it); 0: none.
	ResponseTimeoutMS int64      `json:"response_timeout_ms,omitempty"`
	Headers           *Headers   `json:"headers,omitempty"`
	BasicAuth         *BasicAuth `json:"basic_auth,omitempty"`
	// Compress gzips textual answers for clients that accept it.
	Compress bool `json:"compress,omitempty"`
	// RedirectTo makes the route a redirect: requests answer 308 to
	// this hostname (the canonical one, never a wildcard) with the same
	// path and query, instead of reaching a Container. x-ports
	// redirect_from writes one such route per name it lists.
	RedirectTo string `json:"redirect_to,omitempty"`
	// UpstreamProtocol is how the ingress speaks to the route's
	// Containers: "" is HTTP/1.1 (gRPC calls go over HTTP/2 whatever
	// it says), UpstreamH2C is HTTP/2 without TLS for every request but
	// connection upgrades.
	UpstreamProtocol string `json:"upstream_protocol,omitempty"`
	// TLS TLSOnDemand (a wildcard route only) lets the ingress obtain a
	// certificate for a name under the wildcard at that name's first TLS
	// handshake; "" issues nothing on demand.
	TLS string `json:"tls,omitempty"`
}

// TLSOnDemand is the TLS of a wildcard route whose names get their
// certificates at their first handshake.
const TLSOnDemand = "on_demand"

// CheckTLS checks an x-ports tls for hostname: "" or TLSOnDemand, the
// latter only on a wildcard (any other name is issued without asking).
func CheckTLS(t, hostname string) (string, error) {
	switch strings.ToLower(t) {
	case "":
		return "", nil
	case TLSOnDemand, "on-demand":
		if !strings.HasPrefix(hostname, "*.") {
			return "", fmt.Errorf("on_demand needs a wildcard hostname (*.example.com): %s gets its certificate without it", hostname)
		}
		return TLSOnDemand, nil
	}
	return "", fmt.Errorf("%q is not on_demand", t)
}

// UpstreamH2C is the UpstreamProtocol of Containers that speak HTTP/2
// without TLS (prior knowledge, RFC 9113 3.3).
const UpstreamH2C = "h2c"

// CheckUpstreamProtocol normalises an x-ports upstream_protocol: "" and
// "http1" are the default (""), "h2c" and "grpc" (a gRPC server speaks
// h2c) are UpstreamH2C.
func CheckUpstreamProtocol(p string) (string, error) {
	switch strings.ToLower(p) {
	case "", "http1", "http/1.1":
		return "", nil
	case UpstreamH2C, "grpc":
		return UpstreamH2C, nil
	}
	return "", fmt.Errorf("%q is not http1, h2c or grpc", p)
}

// Headers are an HTTP route's header rules: what the Container receives
// (Request) and what the client receives (Response). Field names are
// frozen: they travel in replicated Container rows.
type Headers struct {
	Request  *HeaderRules `json:"request,omitempty"`
	Response *HeaderRules `json:"response,omitempty"`
}

// HeaderRules remove headers, then set others (a set header replaces
// every value it had). Names are canonical (http.CanonicalHeaderKey).
type HeaderRules struct {
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// BasicAuth admits a request only with the user name and password of one
// of Users, which maps each name to a bcrypt hash of its password (never
// the password). Realm names the protected space to browsers.
type BasicAuth struct {
	Realm string            `json:"realm,omitempty"`
	Users map[string]string `json:"users"`
}

// protected are headers a rule may not touch: the proxy and HTTP itself
// own them.
var protected = []string{"Host", "Connection", "Content-Length", "Transfer-Encoding", "Upgrade", "Te", "Trailer",
	"Keep-Alive", "Proxy-Connection", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Prefix"}

// Normalize checks h and returns it with canonical names (nil when it has
// no rule). Errors name the offending field below headers.
func (h *Headers) Normalize() (*Headers, error) {
	if h == nil {
		return nil, nil
	}
	req, err := h.Request.normalize("request")
	if err != nil {
		return nil, err
	}
	resp, err := h.Response.normalize("response")
	if err != nil {
		return nil, err
	}
	if req == nil && resp == nil {
		return nil, nil
	}
	return &Headers{Request: req, Response: resp}, nil
}

func (r *HeaderRules) normalize(field string) (*HeaderRules, error) {
	if r == nil || len(r.Set) == 0 && len(r.Remove) == 0 {
		return nil, nil
	}
	out := &HeaderRules{}
	for _, name := range r.Remove {
		c, err := headerName(name)
		if err != nil {
			return nil, fmt.Errorf("%s.remove: %w", field, err)
		}
		if !slices.Contains(out.Remove, c) {
			out.Remove = append(out.Remove, c)
		}
	}
	slices.Sort(out.Remove)
	for name, v := range r.Set {
		c, err := headerName(name)
		if err != nil {
			return nil, fmt.Errorf("%s.set: %w", field, err)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("%s.set.%s: the value holds a line break or NUL", field, c)
		}
		if _, dup := out.Set[c]; dup {
			return nil, fmt.Errorf("%s.set: %s is set twice (names are case-insensitive)", field, c)
		}
		if out.Set == nil {
			out.Set = map[string]string{}
		}
		out.Set[c] = v
	}
	return out, nil
}

// headerName checks a header name (an HTTP token, not one the proxy owns)
// and returns its canonical form.
func headerName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("a header name is empty")
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return "", fmt.Errorf("%q is not a header name", name)
		}
	}
	c := http.CanonicalHeaderKey(name)
	if slices.Contains(protected, c) {
		return "", fmt.Errorf("%s is the proxy's to set", c)
	}
	return c, nil
}

// Apply removes, then sets, r's headers in h.
func (r *HeaderRules) Apply(h http.Header) {
	if r == nil {
		return
	}
	for _, name := range r.Remove {
		h.Del(name)
	}
	for name, v := range r.Set {
		h[name] = []string{v}
	}
}

// Check checks a's users: at least one, names without ':' or control
// characters, each with a bcrypt hash ($2a$, $2b$ or $2y$). Errors name
// the offending field below basic_auth.
func (a *BasicAuth) Check() error {
	if a == nil {
		return nil
	}
	if strings.ContainsAny(a.Realm, "\"\\\r\n\x00") {
		return fmt.Errorf("realm: %q holds a quote, backslash or line break", a.Realm)
	}
	if len(a.Users) == 0 {
		return fmt.Errorf("users: none; name at least one with its bcrypt hash")
	}
	for name, hash := range a.Users {
		if name == "" || strings.ContainsAny(name, ":") || strings.IndexFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
			return fmt.Errorf("users: %q is not a user name (no ':' or control characters)", name)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil || !strings.HasPrefix(hash, "$2") {
			return fmt.Errorf("users.%s: not a bcrypt hash (want $2y$... as `htpasswd -nbB %s PASSWORD` prints after the colon; in a compose file each $ is written $$)", name, name)
		}
	}
	return nil
}

// Allows reports whether user and password are one of a's users. It
// costs a bcrypt comparison (tens of milliseconds): callers cache what
// it admitted.
func (a *BasicAuth) Allows(user, password string) bool {
	hash, ok := a.Users[user]
	return ok && bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

// Redacted is a with every hash left out: what a status may show.
func (a *BasicAuth) Redacted() *BasicAuth {
	if a == nil {
		return nil
	}
	out := &BasicAuth{Realm: a.Realm, Users: make(map[string]string, len(a.Users))}
	for name := range a.Users {
		out.Users[name] = ""
	}
	return out
}
