package caddyconfig

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ployz/ployz/sdk/ingress"
)

// TLS is the HTTPS input of the config generator (CaddyConfigTLS).
type TLS struct {
	// Listen is the HTTPS listen address, e.g. ":443"; empty serves no
	// HTTPS (challenges are still answered on HTTP).
	Listen string
	// Certificates are loaded as they are (Caddy never issues); a
	// hostname is served on Listen when one of them covers it.
	Certificates []Certificate
	// Challenges are answered on HTTP, each for its own hostname only.
	Challenges []Challenge
	// OnDemand are the wildcards ("*.example.com") of routes with tls
	// on_demand: a handshake for a name under one that no certificate
	// covers asks OnDemandPermission, then OnDemandManager for it.
	OnDemand []string
	// HTTPSPort is the port clients reach HTTPS on (Listen's, which may be
	// an inherited socket's "fd/N"): HTTP routes of a hostname some
	// certificate covers redirect there. 0 redirects nothing.
	HTTPSPort int
}

// Certificate is PEM material: the leaf first, then its chain, and the
// private key. Hostname is the name it was loaded for (a wildcard's
// "*.example.com" too): the routing table redirects that name's HTTP
// routes to HTTPS. It is not part of the config.
type Certificate struct {
	CertPEM  string
	KeyPEM   string
	Hostname string
}

// Challenge is one HTTP-01 answer.
type Challenge struct {
	// Hostname is the certificates row's name (lowercase), the one name
	// its order validates: the challenge is answered for this Host only,
	// so a row cannot obtain certificates for other names pointing here.
	Hostname         string
	Token            string
	KeyAuthorization string
}

// Modules of on-demand issuance the proxy registers: Caddy's permission
// check answered from the proxy's routes, the handshake-time source of
// the certificate (the proxy's ACME manager, which issues for the
// Cluster), and an issuer that refuses, so Caddy itself never orders.
const (
	OnDemandPermission = "ployz_routes"
	OnDemandManager    = "ployz_on_demand"
	RefuseIssuer       = "ployz_refuse"
)

// httpServer is CaddyConfig's HTTP server; httpsServer the one added
// for HTTPS.
const (
	httpServer  = "ingress"
	httpsServer = "ingress_tls"
)

// CaddyConfigTLS is CaddyConfig plus HTTPS: when t.Listen is set and
// there is material, the certificates loaded into Caddy's tls app
// (load_pem, no automation: automatic HTTPS stays off) and a second
// server on t.Listen with the same routes as HTTP, which completes a
// handshake only for a hostname some certificate covers (by SNI). Without
// material nothing listens on t.Listen, so a Machine whose port 443 is
// taken keeps serving HTTP until it has a certificate. With material and
// t.HTTPSPort, the HTTP server's route handler gets that port: it
// redirects (308) the routes of a covered hostname that do not opt out,
// so no redirect points at an HTTPS server Caddy does not run.
// t.Challenges are not part of the config: the proxy's routing table
// answers them on HTTP, so a new challenge reloads nothing. A t without
// material gives CaddyConfig's bytes. Output is deterministic for equal
// input.
func CaddyConfigTLS(listen, machine, stateDir string, routes []ingress.Route, t TLS) ([]byte, error) {
	base, err := CaddyConfig(listen, machine, stateDir, routes)
	if err != nil || t.Listen == "" || len(t.Certificates) == 0 && len(t.OnDemand) == 0 {
		return base, err
	}
	var cfg obj
	dec := json.NewDecoder(bytes.NewReader(base))
	dec.UseNumber()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("caddy config: %w", err)
	}
	apps, _ := cfg["apps"].(obj)
	httpApp, _ := apps["http"].(obj)
	servers, _ := httpApp["servers"].(obj)
	plainHTTP, ok := servers[httpServer].(obj)
	if !ok {
		return nil, fmt.Errorf("caddy config: no http server %q", httpServer)
	}
	plainHTTP["routes"] = serverRoutes(machine, true, t.HTTPSPort)
	servers[httpsServer] = obj{
		"listen":                  []string{t.Listen},
		"listener_wrappers":       []any{obj{"wrapper": ConnWrapper}},
		"automatic_https":         obj{"disable": true},
		"tls_connection_policies": []any{obj{}},
		"protocols":               []string{"h1", "h2"},
		"routes":                  serverRoutes(machine, false, 0),
	}
	pems := make([]any, 0, len(t.Certificates))
	seen := map[string]bool{}
	for _, c := range t.Certificates {
		if seen[c.CertPEM] { // one user certificate may serve several hostnames
			continue
		}
		seen[c.CertPEM] = true
		pems = append(pems, obj{"certificate": c.CertPEM, "key": c.KeyPEM})
	}
	tlsApp := obj{"certificates": obj{"load_pem": pems}, "disable_ocsp_stapling": true}
	if len(t.OnDemand) > 0 {
		tlsApp["automation"] = onDemandAutomation(t.OnDemand)
	}
	apps["tls"] = tlsApp
	return json.Marshal(cfg)
}

// HTTPSConfig is CaddyConfigTLS with one certificate (PEM leaf+chain and
// key) served on listenTLS: the HTTPS config for callers holding their own
// material, such as benchmarks.
func HTTPSConfig(listen, listenTLS, machine, stateDir string, routes []ingress.Route, certPEM, keyPEM string) ([]byte, error) {
	return CaddyConfigTLS(listen, machine, stateDir, routes, TLS{Listen: listenTLS,
		Certificates: []Certificate{{CertPEM: certPEM, KeyPEM: keyPEM}}})
}

// onDemandAutomation is the tls app's automation for on-demand
// wildcards: a handshake for a name under one (and no loaded certificate)
// asks OnDemandPermission, which answers from the proxy's routes, then
// gets the certificate from OnDemandManager; Caddy's own issuance is
// RefuseIssuer. Other names match no policy with on_demand, so an unknown
// name still fails its handshake without asking anything.
func onDemandAutomation(wildcards []string) obj {
	return obj{
		"on_demand": obj{"permission": obj{"module": OnDemandPermission}},
		"policies": []any{obj{
			"subjects":        wildcards,
			"on_demand":       true,
			"get_certificate": []any{obj{"via": OnDemandManager}},
			"issuers":         []any{obj{"module": RefuseIssuer}},
		}},
	}
}
