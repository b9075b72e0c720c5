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
//   - upstreams in the route's order, ejected ones last (table.go);
//   - a dial failure is retried at once on the next upstream, whatever
//     the method (nothing was sent); a GET, HEAD or OPTIONS without a
//     body that fails before a response is retried too; at most
//     forwardRetries retries;
//   - a failed round trip (other than by the client going away) ejects
//     its upstream;
//   - the client's X-Forwarded-* are replaced (no client is trusted),
//     Host is kept.
const (
	forwardRetries = 2
	dialTimeout    = time.Second
	// idlePerUpstream keeps a keep-alive pool to each upstream as deep
	// as the client connections a busy route multiplexes onto it.
	idlePerUpstream     = 64
	upstreamIdleTimeout = 2 * time.Minute
)

type routeKey struct{}

// forwarder is the process's one upstream transport and proxy (a
// reload keeps its upstream connections).
var forwarder = newForwarder()

type forwardProxy struct {
	rp *httputil.ReverseProxy
	tr *http.Transport
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
	f.rp = &httputil.ReverseProxy{
		Rewrite:      rewrite,
		Transport:    f,
		BufferPool:   bufferPool{},
		ErrorHandler: badGateway,
		ErrorLog:     log.New(logWriter{}, "", 0),
	}
	return f
}

// serve proxies r to rt's upstreams.
func (f *forwardProxy) serve(w http.ResponseWriter, r *http.Request, rt *httpRoute) {
	f.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, rt)))
}

func rewrite(pr *httputil.ProxyRequest) {
	pr.SetXForwarded()
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
	var err error
	for i, d := range ordered(rt.dials) {
		if i > forwardRetries {
			break
		}
		req.URL.Host = d
		var res *http.Response
		if res, err = f.tr.RoundTrip(req); err == nil {
			return res, nil
		}
		if req.Context().Err() != nil || errors.Is(err, context.Canceled) {
			return nil, err // the client went away: not the upstream's failure
		}
		eject(d, err)
		if !isDialError(err) && !replayable(req) {
			break
		}
	}
	return nil, err
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

// badGateway answers a request no upstream answered (as reverse_proxy
// did: 502, empty body).
func badGateway(w http.ResponseWriter, _ *http.Request, _ error) {
	w.WriteHeader(http.StatusBadGateway)
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
