package caddyconfig

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

func TestCaddyConfigDeterministic(t *testing.T) {
	routes := []ingress.Route{
		{Hostname: "a.example.test", Owner: "demo/a", State: ingress.RoutePublished, Upstreams: []string{"10.0.0.2:80", "10.0.0.1:80"}},
		{Hostname: "b.example.test", Owner: "demo/b", State: ingress.RoutePending},
	}
	c1, err := CaddyConfig(":80", "m1", "/tmp/x", routes)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := CaddyConfig(":80", "m1", "/tmp/x", routes)
	if string(c1) != string(c2) {
		t.Fatal("config not deterministic")
	}
	s := string(c1)
	for _, want := range []string{`"automatic_https":{"disable":true}`, `"handle":[{"challenges":true,"handler":"ployz_route"}]`, `"/.ployz-verify"`, `"persist":false`, `"disabled":true`} {
		if !strings.Contains(s, want) {
			t.Errorf("config lacks %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, "reverse_proxy") {
		t.Errorf("the ingress's own handler proxies, not reverse_proxy:\n%s", s)
	}
	// Routing changes (hostnames, owners, upstreams, states) leave the
	// config as it is: they never reload Caddy.
	other := []ingress.Route{{Hostname: "c.example.test", Owner: "demo/c", State: ingress.RoutePublished, Upstreams: []string{"10.0.0.9:80"}}}
	if c3, _ := CaddyConfig(":80", "m1", "/tmp/x", other); string(c3) != s {
		t.Errorf("an HTTP routing change changed the config:\n%s\n%s", c3, s)
	}
	if strings.Contains(s, "10.0.0.") || strings.Contains(s, "a.example.test") {
		t.Errorf("the config names routes: %s", s)
	}
}

func TestCaddyConfigTLS(t *testing.T) {
	routes := []ingress.Route{{Hostname: "a.test", Owner: "p/web", State: "published", Upstreams: []string{"10.0.0.1:8080"}}}
	plain, _ := CaddyConfig(":80", "m1", "/tmp/s", routes)
	for _, empty := range []TLS{{}, {Listen: ":443"}, {Challenges: []Challenge{{Token: "t", KeyAuthorization: "t.k"}}}} {
		same, err := CaddyConfigTLS(":80", "m1", "/tmp/s", routes, empty)
		if err != nil || string(same) != string(plain) {
			t.Fatalf("TLS without material or challenges changed the config: %v", err)
		}
	}
	in := TLS{Listen: ":443", Certificates: []Certificate{{CertPEM: "C", KeyPEM: "K"}},
		Challenges: []Challenge{{Token: "tok", KeyAuthorization: "tok.x"}}}
	b, err := CaddyConfigTLS(":80", "m1", "/tmp/s", routes, in)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := CaddyConfigTLS(":80", "m1", "/tmp/s", routes, in)
	if string(again) != string(b) {
		t.Fatal("not deterministic")
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen      []string          `json:"listen"`
					AutoHTTPS   map[string]bool   `json:"automatic_https"`
					TLSPolicies []json.RawMessage `json:"tls_connection_policies"`
					Routes      []json.RawMessage `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
			TLS struct {
				Certificates struct {
					LoadPEM []struct{ Certificate, Key string } `json:"load_pem"`
				} `json:"certificates"`
				Automation json.RawMessage `json:"automation"`
			} `json:"tls"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	h, s := cfg.Apps.HTTP.Servers["ingress"], cfg.Apps.HTTP.Servers["ingress_tls"]
	// Challenges are answered from the proxy's table, not the config.
	if len(h.Routes) != 2 || strings.Contains(string(b), "tok.x") || !strings.Contains(string(h.Routes[1]), `"challenges":true`) {
		t.Fatalf("http routes: %s", h.Routes)
	}
	if s.Listen[0] != ":443" || !s.AutoHTTPS["disable"] || len(s.TLSPolicies) != 1 || len(s.Routes) != 2 || strings.Contains(string(s.Routes[1]), "challenges") {
		t.Fatalf("https server: %+v", s)
	}
	if lp := cfg.Apps.TLS.Certificates.LoadPEM; len(lp) != 1 || lp[0].Certificate != "C" || lp[0].Key != "K" || cfg.Apps.TLS.Automation != nil {
		t.Fatalf("tls app: %+v", cfg.Apps.TLS)
	}
	// Without an HTTPS port nothing redirects.
	if strings.Contains(string(b), "https_port") {
		t.Fatalf("https_port without one: %s", b)
	}
}

// TestCaddyConfigRedirect: with material and an HTTPS port, the HTTP
// server's route handler gets the port (it redirects covered hostnames)
// and the HTTPS server's does not; without material there is no HTTPS
// server, so nothing redirects whatever the port; the certificate's
// hostname and the routes' paths and options stay out of the config.
func TestCaddyConfigRedirect(t *testing.T) {
	no := false
	routes := []ingress.Route{
		{Hostname: "a.test", Owner: "p/web", State: "published", Upstreams: []string{"10.0.0.1:8080"}},
		{Hostname: "a.test", Path: "/api", Options: routeopt.Options{StripPrefix: true, RedirectHTTPS: &no}, Owner: "p/api", State: "published", Upstreams: []string{"10.0.0.2:8080"}},
		{Hostname: "*.b.test", Owner: "p/any", State: "published", Upstreams: []string{"10.0.0.3:8080"}},
	}
	plain, _ := CaddyConfig(":80", "m1", "/tmp/s", routes)
	if none, _ := CaddyConfigTLS(":80", "m1", "/tmp/s", routes, TLS{Listen: "fd/7", HTTPSPort: 443}); string(none) != string(plain) {
		t.Fatalf("an HTTPS port without material changed the config:\n%s", none)
	}
	b, err := CaddyConfigTLS(":80", "m1", "/tmp/s", routes, TLS{Listen: "fd/7", HTTPSPort: 8443,
		Certificates: []Certificate{{CertPEM: "C", KeyPEM: "K", Hostname: "a.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen []string `json:"listen"`
					Routes []struct {
						Handle []map[string]any `json:"handle"`
					} `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	h, s := cfg.Apps.HTTP.Servers["ingress"], cfg.Apps.HTTP.Servers["ingress_tls"]
	if got := h.Routes[1].Handle[0]; got["handler"] != RouteHandler || got["https_port"] != float64(8443) || got["challenges"] != true {
		t.Errorf("http route handler %v, want https_port 8443", got)
	}
	if got := s.Routes[1].Handle[0]; got["https_port"] != nil || s.Listen[0] != "fd/7" {
		t.Errorf("https server %v %v: it must not redirect", s.Listen, got)
	}
	for _, leak := range []string{"a.test", "/api", "strip", "*.b.test", "redirect_https"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("the config holds %q: routes change the table, never the config\n%s", leak, b)
		}
	}
}
