package proxy

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/store"
)

// TestServeRedirectFromRealCaddy runs Serve (embedded Caddy, routes from a
// store source) with a Service whose rows carry redirect_from routes:
// their hostnames answer 308 to the canonical hostname over HTTP (no
// certificate), keeping path and query (and the port the Host header
// names), only under the route's
// path; the canonical hostname is proxied; the status lists the
// redirecting routes with their target.
func TestServeRedirectFromRealCaddy(t *testing.T) {
	app := echoBackend(t, "app")
	www := store.IngressRoute{Hostname: "www.example.test", Options: routeopt.Options{RedirectTo: "example.test"}}
	shop := store.IngressRoute{Hostname: "old.example.test", Path: "/shop", Options: routeopt.Options{RedirectTo: "example.test"}}
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{
		routeRow("c-app", "app", app, store.IngressRoute{Hostname: "example.test"}, www, shop),
	}, nil)
	listen := freePort(t)
	_, port, _ := net.SplitHostPort(listen)
	loads := serveSpec(t, listen, src)
	var st ingress.Status
	waitLoad(t, loads, func(s ingress.Status) bool { st = s; return len(s.Routes) == 3 })
	if r := st.Routes[2]; r.Key() != "www.example.test" || r.RedirectTo != "example.test" || r.State != ingress.RoutePublished {
		t.Errorf("status route %+v", r)
	}

	for _, c := range []struct{ host, path, want string }{
		{"WWW.example.test", "/orders/7?x=1&y=%2F", "http://example.test/orders/7?x=1&y=%2F"},
		{"www.example.test:" + port, "/", "http://example.test:" + port + "/"},
		{"old.example.test", "/shop/cart?id=3", "http://example.test/shop/cart?id=3"},
	} {
		code, loc, _ := request(t, "POST", listen, c.host, c.path, "")
		if code != http.StatusPermanentRedirect || loc != c.want {
			t.Errorf("%s%s: %d %q, want 308 to %s", c.host, c.path, code, loc, c.want)
		}
	}
	if code, _, body := request(t, "GET", listen, "example.test", "/orders", ""); code != 200 || body != "app GET /orders  payload" {
		t.Errorf("canonical: %d %q", code, body)
	}
	if code, _, _ := request(t, "GET", listen, "old.example.test", "/other", ""); code != 404 {
		t.Errorf("old.example.test outside the route's path: %d, want 404", code)
	}
}

// TestRedirectFromHTTPSRealCaddy loads CaddyConfigTLS with certificates
// for a.test and www.a.test: HTTP to www.a.test answers 308 straight to
// https://a.test on the HTTPS port (one hop), HTTPS to www.a.test to
// https://a.test; a route that opts out of the HTTPS redirect, or whose
// target no certificate covers, keeps HTTP.
func TestRedirectFromHTTPSRealCaddy(t *testing.T) {
	up := echoBackend(t, "app").Listener.Addr().String()
	certA, keyA, _ := testCert("a.test")
	certW, keyW, derW := testCert("www.a.test")
	httpAddr, tlsAddr := freePort(t), freePort(t)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	no := false
	pub := func(host, to string, o routeopt.Options) ingress.Route {
		o.RedirectTo = to
		return ingress.Route{Hostname: host, Options: o, Owner: "p/web", State: ingress.RoutePublished, Upstreams: []string{up}}
	}
	routes := []ingress.Route{
		pub("a.test", "", routeopt.Options{}), pub("www.a.test", "a.test", routeopt.Options{}),
		pub("old.a.test", "a.test", routeopt.Options{RedirectHTTPS: &no}),
		pub("b.test", "", routeopt.Options{}), pub("www.b.test", "b.test", routeopt.Options{}),
	}
	in := caddyconfig.TLS{Listen: tlsAddr, HTTPSPort: must(strconv.Atoi(tlsPort)), Certificates: []caddyconfig.Certificate{
		{CertPEM: certA, KeyPEM: keyA, Hostname: "a.test"}, {CertPEM: certW, KeyPEM: keyW, Hostname: "www.a.test"}}}
	loadTLS(t, httpAddr, routes, in)

	for _, c := range []struct{ host, want string }{
		{"www.a.test", "https://a.test:" + tlsPort + "/p?q=1"},
		{"old.a.test:" + httpPort, "http://a.test:" + httpPort + "/p?q=1"},
		{"www.b.test", "http://b.test/p?q=1"},
	} {
		if code, loc, _ := request(t, "GET", httpAddr, c.host, "/p?q=1", ""); code != http.StatusPermanentRedirect || loc != c.want {
			t.Errorf("http %s: %d %q, want 308 to %s", c.host, code, loc, c.want)
		}
	}

	c := httpsClient(derW, tlsAddr)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get("https://www.a.test:" + tlsPort + "/p?q=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := "https://a.test:" + tlsPort + "/p?q=1"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Fatalf("https www.a.test: %d %q, want 308 to %s", resp.StatusCode, resp.Header.Get("Location"), want)
	}
}

// TestCertHostnamesIncludeRedirects: a redirecting hostname is handed to
// the certificate manager like any routed one (so HTTPS to it can answer
// its 308), wildcards too (for a user certificate); TCP routes and
// ownerless conflicts are not.
func TestCertHostnamesIncludeRedirects(t *testing.T) {
	routes := []ingress.Route{
		{Hostname: "example.test", State: ingress.RoutePublished},
		{Hostname: "www.example.test", Options: routeopt.Options{RedirectTo: "example.test"}, State: ingress.RoutePending},
		{Hostname: "*.example.test", State: ingress.RoutePublished},
		{Hostname: "taken.example.test", State: ingress.RouteConflict},
		{Protocol: "tcp", Port: 5432, State: ingress.RoutePublished},
	}
	if got := certHostnames(routes); !slices.Equal(got, []string{"example.test", "www.example.test", "*.example.test"}) {
		t.Fatalf("hostnames %v", got)
	}
}
