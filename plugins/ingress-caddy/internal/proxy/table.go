package proxy

import (
	"cmp"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
)

// The routing table: which hostname and TCP port goes where. Caddy's
// config only names the listeners and certificates; every request and
// TCP connection looks its route up here, so a deploy, a scale, a
// retirement or a Serving Pointer move swaps this table in place and
// never reloads Caddy (a reload closes idle keep-alive connections under
// clients about to reuse them).

// table is the routing table in force; nil before the first store read.
var table atomic.Pointer[routeTable]

type routeTable struct {
	http       map[string]*hostRoutes       // lowercase hostname, or a wildcard "*.example.com"
	tcp        map[int]*tcpRoute            // port
	challenges map[string]map[string]string // HTTP-01 token -> hostname -> key authorization
	// secure are the hostnames (and wildcards) a loaded certificate
	// covers: their routes redirect HTTP to HTTPS while the HTTP server's
	// handler has an HTTPS port, i.e. while Caddy serves HTTPS.
	secure map[string]bool
	// entering counts requests between looking their route up here and
	// counting themselves on it (drain.go).
	entering atomic.Int64
}

// hostRoutes are one hostname's routes, the longest path first; plain is
// the only route when it is for the whole hostname (no path to clean or
// compare).
type hostRoutes struct {
	routes []*httpRoute
	plain  *httpRoute
}

// httpRoute is one hostname and path: an answer of its own (status != 0:
// pending or ownerless conflict) or the upstreams to proxy to, with the
// route's options.
type httpRoute struct {
	path     string // "" is the whole hostname
	strip    bool   // the upstream sees the path without path
	redirect bool   // HTTP redirects to HTTPS once a certificate covers the hostname
	// redirectTo is the canonical hostname a redirecting route (x-ports
	// redirect_from) answers 308 to; "" proxies.
	redirectTo string
	status     int
	body       string
	options    // limits, header rules, authentication (options.go)
	upstreams
	// inflight counts the requests being proxied on this route (drain.go).
	// A route that keeps every upstream of the route for its hostname and
	// path in the table before shares that route's counter (inherit), so
	// a request keeps counting across the swaps of every refresh round
	// until a swap takes one of its upstreams away.
	inflight *atomic.Int64
}

type tcpRoute struct{ upstreams }

// upstreams are a route's addresses, this Machine's first (the first
// local of them), and the turn that spreads requests over the local ones.
type upstreams struct {
	dials []string
	local int
	turn  atomic.Uint32
}

func newUpstreams(rt ingress.Route) upstreams {
	return upstreams{dials: rt.Upstreams, local: min(max(rt.Local, 0), len(rt.Upstreams))}
}

// buildTable turns routes into a routing table, with the HTTP-01
// challenges and the hostnames of the certificates in tlsIn.
func buildTable(routes []ingress.Route, tlsIn caddyconfig.TLS) *routeTable {
	t := &routeTable{http: map[string]*hostRoutes{}, tcp: map[int]*tcpRoute{}, challenges: map[string]map[string]string{},
		secure: map[string]bool{}}
	for _, c := range tlsIn.Challenges {
		if t.challenges[c.Token] == nil {
			t.challenges[c.Token] = map[string]string{}
		}
		t.challenges[c.Token][c.Hostname] = c.KeyAuthorization
	}
	for _, c := range tlsIn.Certificates {
		if c.Hostname != "" {
			t.secure[c.Hostname] = true
		}
	}
	for _, rt := range routes {
		if rt.Protocol == "tcp" {
			if rt.Owner != "" && len(rt.Upstreams) > 0 {
				t.tcp[rt.Port] = &tcpRoute{upstreams: newUpstreams(rt)}
			}
			continue
		}
		h := t.http[rt.Hostname]
		if h == nil {
			h = &hostRoutes{}
			t.http[rt.Hostname] = h
		}
		h.routes = append(h.routes, newHTTPRoute(rt))
	}
	for _, h := range t.http {
		slices.SortFunc(h.routes, func(a, b *httpRoute) int { return cmp.Compare(len(b.path), len(a.path)) })
		if len(h.routes) == 1 && h.routes[0].path == "" {
			h.plain = h.routes[0]
		}
	}
	return t
}

// newHTTPRoute is rt as the table serves it.
func newHTTPRoute(rt ingress.Route) *httpRoute {
	key := rt.Key()
	r := &httpRoute{inflight: new(atomic.Int64), path: rt.Path, strip: rt.StripPrefix && rt.Path != "", redirect: rt.RedirectHTTPS == nil || *rt.RedirectHTTPS,
		redirectTo: rt.RedirectTo, options: newOptions(rt)}
	switch {
	case rt.Owner == "":
		r.status, r.body = http.StatusServiceUnavailable, "ployz: "+key+" is claimed by several Services; nothing is published\n"
	case len(rt.Upstreams) == 0 && len(rt.Down) > 0:
		r.status = http.StatusServiceUnavailable
		r.body = "ployz: every Container of " + key + " is on a Machine that is down (" + strings.Join(rt.Down, ", ") + ")\n"
	case len(rt.Upstreams) == 0:
		r.status, r.body = http.StatusBadGateway, "ployz: no ready Container for "+key+"\n"
	default:
		r.upstreams = newUpstreams(rt)
	}
	return r
}

// route is the route a request for host (hostKey) and raw path takes: the
// longest matching path of the exact hostname, else of the wildcard
// covering it (package ingress's matching); nil when none matches.
func (t *routeTable) route(host, raw string) *httpRoute {
	if rt := t.http[host].match(raw); rt != nil {
		return rt
	}
	if w := wildcardOf(host); w != "" {
		return t.http[w].match(raw)
	}
	return nil
}

// match is the longest of h's routes whose path matches raw, cleaned.
func (h *hostRoutes) match(raw string) *httpRoute {
	if h == nil {
		return nil
	}
	if h.plain != nil {
		return h.plain
	}
	p := cleanPath(raw)
	for _, rt := range h.routes {
		if ingress.PathMatches(rt.path, p) {
			return rt
		}
	}
	return nil
}

// wildcardOf is the wildcard that would cover host ("*.example.com" for
// a.example.com), "" when host's first label is not one a wildcard covers.
func wildcardOf(host string) string {
	i := strings.IndexByte(host, '.')
	if i <= 0 || !ingress.HostMatches("*"+host[i:], host) {
		return ""
	}
	return "*" + host[i:]
}

// secures reports whether a loaded certificate covers host.
func (t *routeTable) secures(host string) bool {
	if t.secure[host] {
		return true
	}
	w := wildcardOf(host)
	return w != "" && t.secure[w]
}

// cleanPath is a request path as routes match it: path.Clean's, rooted,
// keeping a final slash (an upstream may tell /dir/ from /dir).
func cleanPath(raw string) string {
	if raw == "" || raw == "/" {
		return "/"
	}
	p := path.Clean("/" + raw)
	if strings.HasSuffix(raw, "/") && p != "/" {
		p += "/"
	}
	return p
}

// addrs is every upstream address the table routes to.
func (t *routeTable) addrs() map[string]bool {
	m := map[string]bool{}
	if t == nil {
		return m
	}
	for _, h := range t.http {
		for _, r := range h.routes {
			for _, d := range r.dials {
				m[d] = true
			}
		}
	}
	for _, r := range t.tcp {
		for _, d := range r.dials {
			m[d] = true
		}
	}
	return m
}

// inherit gives each of t's routes the in-flight counter of prev's route
// for the same hostname and path when t's keeps all of its upstreams: a
// request that entered prev (or a table before it) may be on any of
// them, and must still hold back the ack of the swap that later takes
// one away. Without it a WebSocket opened before an unrelated refresh
// round was forgotten, and its Container stopped under it at once.
func (t *routeTable) inherit(prev *routeTable) {
	if t == nil || prev == nil {
		return
	}
	for host, h := range t.http {
		old, ok := prev.http[host]
		if !ok {
			continue
		}
		for _, r := range h.routes {
			for _, o := range old.routes {
				if o.path == r.path && !slices.ContainsFunc(o.dials, func(a string) bool { return !slices.Contains(r.dials, a) }) {
					r.inflight = o.inflight
				}
			}
		}
	}
}

// publish makes next the routing table in force. An address that was
// not routed before (its Container became ready again) loses any
// ejection at once; TCP connections to addresses no longer routed start
// their drain window.
func publish(next *routeTable) (prev *routeTable) {
	next.inherit(table.Load()) // only the refresh loop publishes
	prev = table.Swap(next)
	was, now := prev.addrs(), next.addrs()
	for a := range now {
		if !was[a] {
			unEject(a)
		}
	}
	retireTCP(prev, next)
	return prev
}

// Passive health: an upstream whose dial or round trip failed is tried
// last for ejectFor; ordering, not removal, so a route whose upstreams
// all failed still tries them.
const ejectFor = 5 * time.Second

var ejected sync.Map // address -> time.Time (until)

// healthLog logs ejections (Serve sets it).
var healthLog atomic.Pointer[hclog.Logger]

// eject makes addr tried last for ejectFor; why is the failure.
func eject(addr string, why error) {
	now := time.Now()
	if !isEjected(addr, now) {
		if l := healthLog.Load(); l != nil {
			(*l).Info("upstream ejected", "upstream", addr, "for", ejectFor, "error", why)
		}
	}
	ejected.Store(addr, now.Add(ejectFor))
}

func unEject(addr string) { ejected.Delete(addr) }

func isEjected(addr string, now time.Time) bool {
	v, ok := ejected.Load(addr)
	if !ok {
		return false
	}
	if now.Before(v.(time.Time)) {
		return true
	}
	ejected.CompareAndDelete(addr, v)
	return false
}

// order is the order one request or connection tries the upstreams in:
// the local ones, each request starting one further than the last (so
// requests spread over this Machine's replicas), then the remote ones in
// the route's order; ejected upstreams go last. Remote upstreams are not
// rotated: a request caught on a Machine whose mesh restarts (an upgrade)
// can hang until the client gives up, and rotating would put every
// remote Machine's restart in the path of a remote-only Machine's
// traffic instead of one. With fewer than two local upstreams there is
// nothing to rotate (no allocation unless one is ejected).
func (u *upstreams) order(now time.Time) []string {
	if u.local < 2 {
		return ordered(u.dials, now)
	}
	turn := int(u.turn.Add(1) - 1) // a new route's first request: the route's order
	out := make([]string, 0, len(u.dials))
	out = appendRotated(out, u.dials[:u.local], turn)
	return ordered(append(out, u.dials[u.local:]...), now)
}

// ordered returns dials with the ejected ones moved last, keeping order
// otherwise; dials itself when none is ejected (no allocation).
func ordered(dials []string, now time.Time) []string {
	n := 0
	for _, d := range dials {
		if isEjected(d, now) {
			n++
		}
	}
	if n == 0 {
		return dials
	}
	out := make([]string, 0, len(dials))
	late := make([]string, 0, n)
	for _, d := range dials {
		if isEjected(d, now) {
			late = append(late, d)
		} else {
			out = append(out, d)
		}
	}
	return append(out, late...)
}

// appendRotated appends group to out starting at index turn (mod its
// length).
func appendRotated(out, group []string, turn int) []string {
	if len(group) == 0 {
		return out
	}
	k := turn % len(group)
	return append(append(out, group[k:]...), group[:k]...)
}

// hostKey is r.Host as a table key: lowercase, without port or final dot.
func hostKey(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

func init() { caddy.RegisterModule(routeHandler{}) }

// routeHandler is the HTTP handler "ployz_route" (caddyconfig.RouteHandler):
// it answers HTTP-01 challenges (when Challenges), unknown hosts,
// pending and conflicting routes itself, redirects a redirect_from
// hostname to its canonical one, redirects to HTTPS (when
// HTTPSPort) a route that lets it whose hostname a loaded certificate
// covers, and proxies the rest to their route's upstreams (forward.go).
type routeHandler struct {
	Challenges bool `json:"challenges,omitempty"`
	// HTTPSPort is where HTTPS is served, set on the HTTP server while
	// Caddy serves HTTPS (caddyconfig.CaddyConfigTLS).
	HTTPSPort int `json:"https_port,omitempty"`
}

// CaddyModule implements caddy.Module.
func (routeHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers." + caddyconfig.RouteHandler, New: func() caddy.Module { return new(routeHandler) }}
}

// ServeHTTP implements caddyhttp.MiddlewareHandler; it ends the chain.
func (h routeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if draining.Load() {
		w.Header().Set("Connection", "close") // lame duck (conns.go)
	}
	t := enterTable()
	if t == nil {
		return plain(w, http.StatusBadGateway, "ployz: no routes loaded yet\n")
	}
	rt, err := h.answer(t, w, r)
	if rt != nil {
		rt.inflight.Add(1) // before leaving the table: a drain sees one or the other
	}
	t.entering.Add(-1)
	if rt == nil {
		return err
	}
	defer rt.inflight.Add(-1)
	rt.prepareResponse(w)
	forwarder.serve(w, r, rt)
	return nil
}

// answer answers r itself from table t (a challenge, a redirect, a
// refusal, a route's own status) or returns the route to proxy it to.
func (h routeHandler) answer(t *routeTable, w http.ResponseWriter, r *http.Request) (*httpRoute, error) {
	host := hostKey(r.Host)
	if h.Challenges && strings.HasPrefix(r.URL.Path, ingress.ChallengePathPrefix) {
		if hosts, ok := t.challenges[strings.TrimPrefix(r.URL.Path, ingress.ChallengePathPrefix)]; ok {
			// Only for the hostname whose order it is: a certificates
			// row must not validate any other name pointing here.
			ka, ok := hosts[host]
			if !ok {
				return nil, plain(w, http.StatusNotFound, "ployz: no challenge for this host\n")
			}
			w.Header().Set("Content-Type", "text/plain")
			return nil, plainBody(w, http.StatusOK, ka)
		}
	}
	rt := t.route(host, r.URL.Path)
	switch {
	case rt == nil:
		return nil, plain(w, http.StatusNotFound, "ployz: no route for this host and path\n")
	case rt.redirectTo != "":
		return nil, redirectCanonical(w, r, t, rt, h.HTTPSPort)
	case h.HTTPSPort != 0 && rt.redirect && t.secures(host):
		return nil, redirectHTTPS(w, r, host, h.HTTPSPort)
	case !rt.admits(r):
		return nil, unauthorized(w, rt.auth.Realm)
	case rt.status != 0:
		return nil, plain(w, rt.status, rt.body)
	case !rt.limitBody(r):
		return nil, plain(w, http.StatusRequestEntityTooLarge, "ployz: the request body is over "+strconv.FormatInt(rt.maxBody, 10)+" bytes\n")
	}
	return rt, nil
}

// redirectHTTPS answers 308 to the same request over HTTPS: method and
// body are kept, and clients may remember it.
func redirectHTTPS(w http.ResponseWriter, r *http.Request, host string, port int) error {
	target := "https://" + host
	if port != 443 {
		target = "https://" + net.JoinHostPort(host, strconv.Itoa(port))
	}
	w.Header().Set("Location", target+r.URL.RequestURI())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	return plainBody(w, http.StatusPermanentRedirect, "ployz: "+host+" is served over HTTPS\n")
}

// redirectCanonical answers 308 to the same path and query on rt's
// canonical hostname, in one hop: over HTTPS when the request came so or
// when HTTP would be redirected there anyway (a loaded certificate covers
// the target and the route lets it), else over HTTP on the request's port.
func redirectCanonical(w http.ResponseWriter, r *http.Request, t *routeTable, rt *httpRoute, httpsPort int) error {
	scheme, port := "http", portOf(r.Host)
	switch {
	case r.TLS != nil:
		scheme = "https"
	case httpsPort != 0 && rt.redirect && t.secures(rt.redirectTo):
		scheme, port = "https", ""
		if httpsPort != 443 {
			port = strconv.Itoa(httpsPort)
		}
	}
	target := rt.redirectTo
	if port != "" {
		target = net.JoinHostPort(target, port)
	}
	w.Header().Set("Location", scheme+"://"+target+r.URL.RequestURI())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	return plainBody(w, http.StatusPermanentRedirect, "ployz: "+hostKey(r.Host)+" redirects to "+rt.redirectTo+"\n")
}

// portOf is the port a Host header names, "" when it names none.
func portOf(host string) string {
	if _, p, err := net.SplitHostPort(host); err == nil {
		return p
	}
	return ""
}

func plain(w http.ResponseWriter, status int, body string) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	return plainBody(w, status, body)
}

func plainBody(w http.ResponseWriter, status int, body string) error {
	w.WriteHeader(status)
	_, err := w.Write([]byte(body))
	return err
}

var _ caddyhttp.MiddlewareHandler = routeHandler{}
