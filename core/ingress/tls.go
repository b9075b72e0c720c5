package ingress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// HTTPS: the daemon turns PLOYZ_ACME_DIRECTORY into the spec's acme field
// (ACMEFromEnv); the proxy obtains certificates for the hostnames it
// routes (package acme) and loads them into Caddy with CaddyConfigTLS.
const (
	// LetsEncryptDirectory is the ACME directory used when
	// PLOYZ_ACME_DIRECTORY is unset.
	LetsEncryptDirectory = "https://acme-v02.api.letsencrypt.org/directory"
	// DefaultListenTLS is the HTTPS listen address when HTTPS is on.
	DefaultListenTLS = ":443"
	// DefaultRankDelaySeconds spaces the Machines' turns to issue.
	DefaultRankDelaySeconds = 30
	// ChallengePathPrefix is where HTTP-01 challenges are answered.
	ChallengePathPrefix = "/.well-known/acme-challenge/"
)

// Environment variables the daemon reads (ACMEFromEnv).
const (
	EnvACMEDirectory = "PLOYZ_ACME_DIRECTORY"  // unset: Let's Encrypt; empty: HTTPS off
	EnvACMECAFile    = "PLOYZ_ACME_CA_FILE"    // PEM roots trusted for the directory
	EnvACMEEmail     = "PLOYZ_ACME_EMAIL"      // ACME account contact
	EnvACMERankDelay = "PLOYZ_ACME_RANK_DELAY" // seconds between Machines' turns
)

// ACMESpec is the spec's acme field: HTTPS on, with certificates from
// Directory. Field names are frozen.
type ACMESpec struct {
	// Directory is the ACME directory URL (https).
	Directory string `json:"directory"`
	// CAFile holds PEM roots to trust for Directory besides the system's.
	CAFile string `json:"ca_file,omitempty"`
	// Email is the ACME account's contact.
	Email string `json:"email,omitempty"`
	// RankDelaySeconds: the Machine ranked k by id waits k times this
	// before issuing (default DefaultRankDelaySeconds).
	RankDelaySeconds int `json:"rank_delay_seconds,omitempty"`
}

// ACMEFromEnv derives the spec's acme field from the environment
// (os.LookupEnv): PLOYZ_ACME_DIRECTORY unset means Let's Encrypt's
// production directory, a URL that CA, set but empty HTTPS off (nil).
// Values are checked by ParseSpec, not here, except the rank delay, which
// must be an integer.
func ACMEFromEnv(lookup func(string) (string, bool)) (*ACMESpec, error) {
	dir, set := lookup(EnvACMEDirectory)
	dir = strings.TrimSpace(dir)
	if set && dir == "" {
		return nil, nil
	}
	if !set {
		dir = LetsEncryptDirectory
	}
	a := &ACMESpec{Directory: dir}
	a.CAFile, _ = lookup(EnvACMECAFile)
	a.Email, _ = lookup(EnvACMEEmail)
	if v, ok := lookup(EnvACMERankDelay); ok && strings.TrimSpace(v) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s=%q: not a number of seconds", EnvACMERankDelay, v)
		}
		a.RankDelaySeconds = n
	}
	return a, nil
}

// checkTLS validates and defaults the spec's HTTPS fields; errors name
// the field.
func (s *Spec) checkTLS() error {
	if s.ACME == nil {
		if s.ListenTLS != "" {
			if _, p, err := net.SplitHostPort(s.ListenTLS); err != nil || p == "" || p == "0" {
				return fieldErr("listen_tls", fmt.Sprintf("%q is not a [host]:port", s.ListenTLS))
			}
		}
		return nil
	}
	if s.ListenTLS == "" {
		s.ListenTLS = DefaultListenTLS
	}
	if _, p, err := net.SplitHostPort(s.ListenTLS); err != nil || p == "" || p == "0" {
		return fieldErr("listen_tls", fmt.Sprintf("%q is not a [host]:port", s.ListenTLS))
	}
	if s.ListenTLS == s.Listen {
		return fieldErr("listen_tls", fmt.Sprintf("%q is also listen", s.ListenTLS))
	}
	a := s.ACME
	u, err := url.Parse(a.Directory)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fieldErr("acme.directory", fmt.Sprintf("%q is not an https URL", a.Directory))
	}
	if a.CAFile != "" && !filepath.IsAbs(a.CAFile) {
		return fieldErr("acme.ca_file", fmt.Sprintf("%q is not an absolute path", a.CAFile))
	}
	if a.Email != "" && (!strings.Contains(a.Email, "@") || strings.ContainsAny(a.Email, " \t\r\n:")) {
		return fieldErr("acme.email", fmt.Sprintf("%q is not an email address", a.Email))
	}
	if a.RankDelaySeconds < 0 || a.RankDelaySeconds > 3600 {
		return fieldErr("acme.rank_delay_seconds", fmt.Sprintf("is %d, want 0-3600", a.RankDelaySeconds))
	}
	if a.RankDelaySeconds == 0 {
		a.RankDelaySeconds = DefaultRankDelaySeconds
	}
	return nil
}

// TLS is the HTTPS input of the config generator (CaddyConfigTLS).
type TLS struct {
	// Listen is the HTTPS listen address, e.g. ":443"; empty serves no
	// HTTPS (challenges are still answered on HTTP).
	Listen string
	// Certificates are loaded as they are (Caddy never issues); a
	// hostname is served on Listen when one of them covers it.
	Certificates []Certificate
	// Challenges are answered on HTTP for every host.
	Challenges []Challenge
}

// Certificate is PEM material: the leaf first, then its chain, and the
// private key.
type Certificate struct {
	CertPEM string
	KeyPEM  string
}

// Challenge is one HTTP-01 answer.
type Challenge struct {
	Token            string
	KeyAuthorization string
}

// httpServer is CaddyConfig's HTTP server; httpsServer the one added
// for HTTPS.
const (
	httpServer  = "ingress"
	httpsServer = "ingress_tls"
)

// CaddyConfigTLS is CaddyConfig plus HTTPS: the challenges answered first
// on HTTP, and, when t.Listen is set and there is material, the
// certificates loaded into Caddy's tls app (load_pem, no automation:
// automatic HTTPS stays off) and a second server on t.Listen with the
// same routes as HTTP, which completes a handshake only for a hostname
// some certificate covers (by SNI). Without material nothing listens on
// t.Listen, so a Machine whose port 443 is taken keeps serving HTTP until
// it has a certificate. HTTP keeps serving every route; it does not
// redirect. A t without material or challenges gives CaddyConfig's bytes.
// Output is deterministic for equal input.
func CaddyConfigTLS(listen, machine, stateDir string, routes []Route, t TLS) ([]byte, error) {
	base, err := CaddyConfig(listen, machine, stateDir, routes)
	serveTLS := t.Listen != "" && len(t.Certificates) > 0
	if err != nil || (!serveTLS && len(t.Challenges) == 0) {
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
	srv, ok := servers[httpServer].(obj)
	if !ok {
		return nil, fmt.Errorf("caddy config: no http server %q", httpServer)
	}
	routesJSON, _ := srv["routes"].([]any)
	if serveTLS {
		tlsSrv := obj{
			"listen":                  []string{t.Listen},
			"listener_wrappers":       []any{obj{"wrapper": ConnWrapper}},
			"automatic_https":         obj{"disable": true},
			"tls_connection_policies": []any{obj{}},
			"protocols":               []string{"h1", "h2"},
			"routes":                  routesJSON,
		}
		servers[httpsServer] = tlsSrv
		pems := make([]any, 0, len(t.Certificates))
		for _, c := range t.Certificates {
			pems = append(pems, obj{"certificate": c.CertPEM, "key": c.KeyPEM})
		}
		apps["tls"] = obj{"certificates": obj{"load_pem": pems}, "disable_ocsp_stapling": true}
	}
	if len(t.Challenges) > 0 {
		ch := make([]any, 0, len(t.Challenges)+len(routesJSON))
		for _, c := range t.Challenges {
			ch = append(ch, obj{
				"match": []any{obj{"path": []string{ChallengePathPrefix + c.Token}}},
				"handle": []any{obj{"handler": "static_response", "status_code": 200,
					"headers": obj{"Content-Type": []string{"text/plain"}},
					"body":    c.KeyAuthorization}},
				"terminal": true,
			})
		}
		srv["routes"] = append(ch, routesJSON...)
	}
	return json.Marshal(cfg)
}

// HTTPSConfig is CaddyConfigTLS with one certificate (PEM leaf+chain and
// key) served on listenTLS: the HTTPS config for callers holding their own
// material, such as benchmarks.
func HTTPSConfig(listen, listenTLS, machine, stateDir string, routes []Route, certPEM, keyPEM string) ([]byte, error) {
	return CaddyConfigTLS(listen, machine, stateDir, routes, TLS{Listen: listenTLS,
		Certificates: []Certificate{{CertPEM: certPEM, KeyPEM: keyPEM}}})
}
