package ingress

import (
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
