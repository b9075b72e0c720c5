package proxy

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
)

// The forwarder proxies a routed request to its route's upstreams. It
// replaces Caddy's reverse_proxy on the request path: under load
// reverse_proxy with its transport call and copy took a third of the
// proxy's CPU and this handler an eighth; the difference was
// reverse_proxy's own bookkeeping (a zap logger built per request with
// the request encoded into it, replacer variables, a client trace),
// none of which the ingress uses (docs/benchmarks.md). The standard library's
// ReverseProxy does the HTTP work (hop-by-hop headers, trailers,
// upgrades, streaming flushes); the policy is ours:
//
//   - this Machine's upstreams first, then the others, each group
//     starting one further than the last request (spread over the
//     replicas), ejected ones last (table.go);
//   - a dial failure is retried at once on the next upstream, whatever
//     the method (nothing was sent), and once every upstream has refused
//     a dial the round starts again after dialRoundPause, until
//     dialBudget has passed since the request arrived: a mesh that stops
//     forwarding for a moment (its WireGuard process restarting during an
//     upgrade, on a Machine whose upstreams are all remote) costs latency,
//     not a 502. A dial's own timeout is short, so a SYN lost in such a
//     moment is retried with a fresh dial rather than waited for;
//   - a GET, HEAD or OPTIONS without a body that fails before a response
//     is retried too, at most forwardRetries times;
//   - a failed round trip (other than by the client going away) ejects
//     its upstream;
//   - the client's X-Forwarded-* are replaced (no client is trusted),
//     Host is kept; a route that strips its prefix sends the rest of the
//     cleaned path and the prefix in X-Forwarded-Prefix.
const (
	forwardRetries = 2
	dialTimeout    = time.Second
	// idlePerUpstream keeps a keep-alive pool to each upstream as deep
	// as the client connections a busy route multiplexes onto it.
	idlePerUpstream     = 64
	upstreamIdleTimeout = 2 * time.Minute
)

// dialBudget and dialRoundPause bound the rounds of dials (variables
// for tests).
var (
	dialBudget     = 5 * time.Second
	dialRoundPause = 100 * time.Millisecond
)

type routeKey struct{}

// forwarder is the process's one upstream transport and proxy (a
// reload keeps its upstream connections).
var forwarder = newForwarder()

type forwardProxy struct {
	rp *httputil.ReverseProxy
	tr *http.Transport
	// h2c speaks HTTP/2 without TLS (prior knowledge) to upstreams: for
	// gRPC calls, which HTTP/1.1 cannot carry (trailers, full duplex),
	// and for routes declaring upstream_protocol h2c.
	h2c *http.Transport
}

func newForwarder() *forwardProxy {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	f := &forwardProxy{tr: &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: idlePerUpstream,
		IdleConnTimeout:     upstreamIdleTimeout,
		DisableCompression:  true, // the client's Accept-Encoding passes through
		Proxy:               nil,  // never a proxy from the environment
	}}
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	f.h2c = &http.Transport{
		DialContext:        d.DialContext,
		Protocols:          &h2c,
		IdleConnTimeout:    upstreamIdleTimeout,
		DisableCompression: true,
		Proxy:              nil,
		HTTP2:              &http.HTTP2Config{PingTimeout: 15 * time.Second, SendPingTimeout: 30 * time.Second},
	}
	f.rp = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      f,
		BufferPool:     bufferPool{},
		ModifyResponse: applyResponse,
		ErrorHandler:   badGateway,
		ErrorLog:       log.New(logWriter{}, "", 0),
	}
	return f
}

// serve proxies r to rt's upstreams; a request that may become a
// long-lived stream is tracked so a drain can end it cleanly (streams.go).
func (f *forwardProxy) serve(w http.ResponseWriter, r *http.Request, rt *httpRoute) {
	ctx := context.WithValue(r.Context(), routeKey{}, rt)
	if kind := streamKindOf(r); kind != 0 {
		var done func()
		ctx, done = track(ctx, rt, kind)
		defer done()
		if kind == streamUpgrade {
			s := streamOf(ctx)
			s.ws = newWSPair(r)
			w = hijackWriter{ResponseWriter: w, p: s.ws}
		}
	}
	f.rp.ServeHTTP(w, r.WithContext(ctx))
}

func rewrite(pr *httputil.ProxyRequest) {
	pr.SetXForwarded()
	pr.Out.Header.Del("X-Forwarded-Prefix") // not the client's to say
	if rt, _ := pr.In.Context().Value(routeKey{}).(*httpRoute); rt != nil {
		rt.request.Apply(pr.Out.Header)
		if rt.strip {
			// The upstream sees the path below its prefix, and the prefix
			// in X-Forwarded-Prefix to build its own links.
			pr.Out.URL.Path = ingress.StripPath(rt.path, cleanPath(pr.In.URL.Path))
			pr.Out.URL.RawPath = ""
			pr.Out.Header.Set("X-Forwarded-Prefix", rt.path)
		}
	}
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = "" // RoundTrip picks the upstream
	if pr.Out.Body != nil {
		// The Transport closes a body even when its dial failed; a
		// retry on the next upstream sends the same, still unread,
		// body. The server closes the real one.
		pr.Out.Body = keepOpen{pr.Out.Body}
	}
}

// RoundTrip implements http.RoundTripper: the route's upstreams in
// order under the retry policy.
func (f *forwardProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	rt, _ := req.Context().Value(routeKey{}).(*httpRoute)
	if rt == nil {
		return nil, errNoRoute
	}
	if rt.timeout > 0 {
		return within(rt.timeout, req, func(req *http.Request) (*http.Response, error) { return f.roundTrip(req, rt) })
	}
	return f.roundTrip(req, rt)
}

// roundTrip is RoundTrip once the route is known.
func (f *forwardProxy) roundTrip(req *http.Request, rt *httpRoute) (*http.Response, error) {
	a := attempt{f: f, req: req, deadline: time.Now().Add(dialBudget), h2c: rt.h2c && req.Header.Get("Upgrade") == ""}
	for {
		res, again := a.round(rt.order(time.Now()))
		if res != nil {
			return res, nil
		}
		if !again {
			return nil, a.err
		}
		if err := a.pause(); err != nil {
			return nil, err
		}
	}
}

// attempt is one request's way through its route's upstreams.
type attempt struct {
	f        *forwardProxy
	req      *http.Request
	deadline time.Time
	h2c      bool // the route's upstreams speak HTTP/2 without TLS
	tries    int
	retries  int // failures after something may have been sent
	err      error
}

// round tries each upstream once, within the budget. It reports whether
// a new round may follow: only when every upstream failed to dial and the
// budget is left.
func (a *attempt) round(dials []string) (*http.Response, bool) {
	for _, d := range dials {
		if a.tries > 0 && !time.Now().Before(a.deadline) {
			return nil, false // many upstreams timing out: the budget bounds the wait too
		}
		a.tries++
		a.req.URL.Host = d
		res, err := a.transport().RoundTrip(a.req)
		if err == nil {
			return res, false
		}
		a.err = err
		if a.req.Context().Err() != nil || errors.Is(err, context.Canceled) {
			return nil, false // the client went away: not the upstream's failure
		}
		eject(d, err)
		if isDialError(err) {
			continue // nothing was sent
		}
		if a.retries++; a.retries > forwardRetries || !replayable(a.req) {
			return nil, false
		}
	}
	return nil, a.retries == 0 && time.Now().Before(a.deadline)
}

// transport is the request's way to its upstreams: HTTP/2 without TLS
// for a gRPC call (over HTTP/2, as gRPC is) or on a route that declares
// it, else HTTP/1.1 (an upgrade needs it).
func (a *attempt) transport() *http.Transport {
	if a.h2c || a.req.ProtoMajor == 2 && isGRPC(a.req.Header.Get("Content-Type")) {
		return a.f.h2c
	}
	return a.f.tr
}

// pause waits before the next round, or gives up when the client went
// away.
func (a *attempt) pause() error {
	t := time.NewTimer(dialRoundPause)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-a.req.Context().Done():
		return a.req.Context().Err()
	}
}

var errNoRoute = errors.New("no ployz route for this request")

// replayable: a request the upstream may have received but can be sent
// again (safe method, no body).
func replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return req.Body == nil || req.Body == http.NoBody
	}
	return false
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// badGateway answers a request no upstream answered: 502 with a body
// that says so, telling it apart from an upstream's own 502 (413 and 504
// when the route's body limit or response timeout ended it). Which
// upstreams failed and why is in the ejection log, not in the answer:
// mesh addresses are no business of the public.
func badGateway(w http.ResponseWriter, r *http.Request, err error) {
	code, body := errorStatus(r, err)
	_ = plain(w, code, body)
}

type keepOpen struct{ io.Reader }

func (keepOpen) Close() error { return nil }

// bufferPool lends ReverseProxy its copy buffers (it allocates 32 KiB
// per response without one).
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (bufferPool) Get() []byte { return copyBuffers.Get().(*[32 << 10]byte)[:] }

func (bufferPool) Put(b []byte) {
	if cap(b) == 32<<10 {
		copyBuffers.Put((*[32 << 10]byte)(b[:32<<10]))
	}
}

// logWriter sends what ReverseProxy logs (a response cut short by its
// upstream) to the health log.
type logWriter struct{}

func (logWriter) Write(p []byte) (int, error) {
	if l := healthLog.Load(); l != nil {
		(*l).Warn(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
