package proxy

import (
	"net/http"
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
	http       map[string]*httpRoute        // lowercase hostname
	tcp        map[int]*tcpRoute            // port
	challenges map[string]map[string]string // HTTP-01 token -> hostname -> key authorization
}

// httpRoute is one hostname: an answer of its own (status != 0: pending
// or ownerless conflict) or the upstreams to proxy to.
type httpRoute struct {
	status int
	body   string
	upstreams
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

// buildTable turns routes into a routing table.
func buildTable(routes []ingress.Route, challenges []caddyconfig.Challenge) *routeTable {
	t := &routeTable{http: map[string]*httpRoute{}, tcp: map[int]*tcpRoute{}, challenges: map[string]map[string]string{}}
	for _, c := range challenges {
		if t.challenges[c.Token] == nil {
			t.challenges[c.Token] = map[string]string{}
		}
		t.challenges[c.Token][c.Hostname] = c.KeyAuthorization
	}
	for _, rt := range routes {
		if rt.Protocol == "tcp" {
			if rt.Owner != "" && len(rt.Upstreams) > 0 {
				t.tcp[rt.Port] = &tcpRoute{upstreams: newUpstreams(rt)}
			}
			continue
		}
		switch {
		case rt.Owner == "":
			t.http[rt.Hostname] = &httpRoute{status: http.StatusServiceUnavailable,
				body: "ployz: " + rt.Hostname + " is claimed by several Services; nothing is published\n"}
		case len(rt.Upstreams) == 0 && len(rt.Down) > 0:
			t.http[rt.Hostname] = &httpRoute{status: http.StatusServiceUnavailable,
				body: "ployz: every Container of " + rt.Hostname + " is on a Machine that is down (" + strings.Join(rt.Down, ", ") + ")\n"}
		case len(rt.Upstreams) == 0:
			t.http[rt.Hostname] = &httpRoute{status: http.StatusBadGateway,
				body: "ployz: no ready Container for " + rt.Hostname + "\n"}
		default:
			t.http[rt.Hostname] = &httpRoute{upstreams: newUpstreams(rt)}
		}
	}
	return t
}

// addrs is every upstream address the table routes to.
func (t *routeTable) addrs() map[string]bool {
	m := map[string]bool{}
	if t == nil {
		return m
	}
	for _, r := range t.http {
		for _, d := range r.dials {
			m[d] = true
		}
	}
	for _, r := range t.tcp {
		for _, d := range r.dials {
			m[d] = true
		}
	}
	return m
}

// publish makes next the routing table in force. An address that was
// not routed before (its Container became ready again) loses any
// ejection at once; TCP connections to addresses no longer routed start
// their drain window.
func publish(next *routeTable) {
	prev := table.Swap(next)
	was, now := prev.addrs(), next.addrs()
	for a := range now {
		if !was[a] {
			unEject(a)
		}
	}
	retireTCP(prev, next)
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
// pending and conflicting routes itself and proxies the rest to their
// route's upstreams (forward.go).
type routeHandler struct {
	Challenges bool `json:"challenges,omitempty"`
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
	t := table.Load()
	if t == nil {
		return plain(w, http.StatusBadGateway, "ployz: no routes loaded yet\n")
	}
	if h.Challenges && strings.HasPrefix(r.URL.Path, ingress.ChallengePathPrefix) {
		if hosts, ok := t.challenges[strings.TrimPrefix(r.URL.Path, ingress.ChallengePathPrefix)]; ok {
			// Only for the hostname whose order it is: a certificates
			// row must not validate any other name pointing here.
			ka, ok := hosts[hostKey(r.Host)]
			if !ok {
				return plain(w, http.StatusNotFound, "ployz: no challenge for this host\n")
			}
			w.Header().Set("Content-Type", "text/plain")
			return plainBody(w, http.StatusOK, ka)
		}
	}
	rt := t.http[hostKey(r.Host)]
	if rt == nil {
		return plain(w, http.StatusNotFound, "ployz: no route for this host\n")
	}
	if rt.status != 0 {
		return plain(w, rt.status, rt.body)
	}
	forwarder.serve(w, r, rt)
	return nil
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
