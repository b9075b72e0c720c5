package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

// options are an HTTP route's per-request rules beyond where it goes:
// basic authentication, a request body limit, a response timeout and
// header rules, gzip. The zero value applies none.
type options struct {
	auth     *routeopt.BasicAuth
	maxBody  int64         // 0: no limit
	timeout  time.Duration // 0: none (the client's patience)
	request  *routeopt.HeaderRules
	response *routeopt.HeaderRules
	compress bool // gzip textual answers for clients that accept it (compress.go)
	h2c      bool // upstream_protocol h2c: HTTP/2 without TLS to the upstreams
}

func newOptions(rt ingress.Route) options {
	o := options{auth: rt.BasicAuth, maxBody: rt.MaxBodyBytes, timeout: time.Duration(rt.ResponseTimeoutMS) * time.Millisecond,
		compress: rt.Compress, h2c: rt.UpstreamProtocol == routeopt.UpstreamH2C}
	if rt.Headers != nil {
		o.request, o.response = rt.Headers.Request, rt.Headers.Response
	}
	return o
}

// admits reports whether r may use the route: always without basic
// authentication, else with the name and password of one of its users.
func (o *options) admits(r *http.Request) bool {
	if o.auth == nil {
		return true
	}
	user, pass, ok := r.BasicAuth()
	return ok && admitted.check(o.auth, user, pass)
}

// unauthorized asks for credentials (401, RFC 7617).
func unauthorized(w http.ResponseWriter, realm string) error {
	if realm == "" {
		realm = "ployz"
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`", charset="UTF-8"`)
	return plain(w, http.StatusUnauthorized, "ployz: this route needs a user name and password\n")
}

// admitted remembers the credentials bcrypt accepted, so each costs one
// comparison (tens of milliseconds) rather than one per request. Keys
// are HMACs of the user, password and hash under a key drawn at start: a
// changed hash is a new key, and a memory dump offers no digest cheaper
// to brute-force than the bcrypt hash itself.
var admitted = newAuthCache()

// maxAdmitted bounds the cache; past it, it starts again empty.
const maxAdmitted = 4096

type authCache struct {
	secret [32]byte
	m      sync.Map // [32]byte -> struct{}
	n      atomic.Int64
}

func newAuthCache() *authCache {
	c := &authCache{}
	_, _ = rand.Read(c.secret[:]) // crypto/rand never fails on Linux
	return c
}

func (c *authCache) check(a *routeopt.BasicAuth, user, pass string) bool {
	hash, ok := a.Users[user]
	if !ok {
		return false
	}
	mac := hmac.New(sha256.New, c.secret[:])
	mac.Write([]byte(user + "\x00" + pass + "\x00" + hash))
	var k [32]byte
	mac.Sum(k[:0])
	if _, ok := c.m.Load(k); ok {
		return true
	}
	if !a.Allows(user, pass) {
		return false
	}
	if c.n.Add(1) > maxAdmitted {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(k, struct{}{})
	return true
}

// limitBody applies the route's body limit to r: false when its declared
// length is already over (answer 413 now); otherwise a longer body fails
// the request while it is read, and the forwarder answers 413.
func (o *options) limitBody(r *http.Request) bool {
	if o.maxBody <= 0 {
		return true
	}
	if r.ContentLength > o.maxBody {
		return false
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &limitedBody{r: r.Body, left: o.maxBody}
	}
	return true
}

// errBodyTooLarge fails a request whose body went over its route's limit.
var errBodyTooLarge = errors.New("request body over the route's max_body_size")

// limitedBody reads at most left bytes of r; one more is errBodyTooLarge.
type limitedBody struct {
	r    io.ReadCloser
	left int64
	over atomic.Bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	if int64(n) > b.left {
		b.over.Store(true)
		n = int(b.left)
		b.left = 0
		return n, errBodyTooLarge
	}
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.r.Close() }

// bodyTooLarge reports whether r's body went over its route's limit.
func bodyTooLarge(r *http.Request) bool {
	b, ok := r.Body.(*limitedBody)
	return ok && b.over.Load()
}

// prepareResponse clears what the server set on w for the headers the
// route's response rules name, so the Container's answer, rewritten by
// the rules (applyResponse), is all the client sees of them.
func (o *options) prepareResponse(w http.ResponseWriter) {
	if o.response == nil {
		return
	}
	for _, name := range o.response.Remove {
		w.Header().Del(name)
	}
	for name := range o.response.Set {
		w.Header().Del(name)
	}
}

// applyResponse is the forwarder's ModifyResponse: gzip (when the route
// asks for it and the answer suits it), then the route's response header
// rules on the Container's answer.
func applyResponse(res *http.Response) error {
	if s := streamOf(res.Request.Context()); s != nil {
		s.answered(res)
	}
	if rt, _ := res.Request.Context().Value(routeKey{}).(*httpRoute); rt != nil {
		if rt.compress && compressible(res) {
			compressResponse(res)
		}
		rt.response.Apply(res.Header)
	}
	return nil
}

// errResponseTimeout fails a request whose Container sent no response
// headers within the route's response_timeout.
var errResponseTimeout = errors.New("no response headers within the route's response_timeout")

// within runs rt (the forwarder's round trip) with the route's response
// timeout: past it the attempt is cancelled and errResponseTimeout
// returned; once headers arrive, the body streams for as long as it takes
// (its context ends when it is closed).
func within(d time.Duration, req *http.Request, rt func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	t := time.AfterFunc(d, func() { cancel(errResponseTimeout) })
	res, err := rt(req.WithContext(ctx))
	if !t.Stop() || errors.Is(context.Cause(ctx), errResponseTimeout) {
		if res != nil {
			res.Body.Close()
		}
		cancel(nil)
		return nil, errResponseTimeout
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	res.Body = cancelOnClose{ReadCloser: res.Body, cancel: cancel}
	return res, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}

// errorStatus is the answer to a request no upstream answered: 413 for a
// body over the limit, 504 past the response timeout, else 502.
func errorStatus(r *http.Request, err error) (int, string) {
	switch {
	case bodyTooLarge(r) || errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge, "ployz: the request body is over the route's limit\n"
	case errors.Is(err, errResponseTimeout):
		return http.StatusGatewayTimeout, "ployz: no Container of " + hostKey(r.Host) + " answered within the route's response_timeout\n"
	}
	return http.StatusBadGateway, "ployz: no Container of " + hostKey(r.Host) + " answered\n"
}
