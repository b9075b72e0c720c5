// Package ingress is the contract of a Ployz ingress plugin: the spec the
// daemon hands it (Spec, /run/ployz/ingress.json, a frozen format: fields
// are only added, readers ignore unknown ones), the route states it
// reports, and Compute, the route computation from the replicated store
// that every ingress must honour: a hostname or TCP port routes only to
// the ready Containers its Service's Serving Pointer names, local ones
// first (docs/architecture.md bet 9; docs/plugins.md).
//
// An ingress loads nothing before its first read of the store, keeps its
// loaded config while the store is unreachable, and writes what it loaded
// to a status file the daemon serves as ingress_status, apart from
// execution status (docs/architecture.md, "Execution and ingress status").
// Ployz's own ingress, an embedded Caddy, lives in plugins/ingress-caddy.
package ingress

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/ployz/ployz/sdk/serving"
)

// VerifyPath answers VerifyAnswer(this Machine's id, nonce) on every
// hostname, so a Cluster Machine can tell that a hostname reaches one of
// its Cluster's proxies; it names no Machine to the public.
const VerifyPath = "/.ployz-verify"

// Default paths.
const (
	DefaultSpecPath   = "/run/ployz/ingress.json"
	DefaultStatusPath = "/run/ployz/ingress-status.json"
	DefaultStateDir   = "/var/lib/ployz/ingress"
)

// Spec is the ingress.json document. Field names are frozen.
type Spec struct {
	// Machine is this Machine's id: keys the answer on /.ployz-verify, and its
	// Containers come first among a route's upstreams.
	Machine string `json:"machine"`
	// Listen is the HTTP listen address, e.g. ":80".
	Listen string `json:"listen"`
	// StoreAPI is the replicated store's API: its unix socket (what
	// ployzd hands out, /run/ployz/store/api.sock) or a host:port.
	StoreAPI string `json:"store_api"`
	// StoreTokenFile holds a bearer token for a store reached over TCP;
	// empty sends none (the socket needs none).
	StoreTokenFile string `json:"store_token_file,omitempty"`
	// ClusterSecretFile is the Cluster secret (0600) certificate private
	// keys are sealed with in the store; empty leaves them in plain text.
	ClusterSecretFile string `json:"cluster_secret_file,omitempty"`
	// StatusFile is where the proxy writes its status (default
	// DefaultStatusPath); StateDir holds Caddy's storage (default
	// DefaultStateDir).
	StatusFile string `json:"status_file,omitempty"`
	StateDir   string `json:"state_dir,omitempty"`
	// ACME turns HTTPS on (nil: off): certificates from its directory,
	// served on ListenTLS (default DefaultListenTLS). See tls.go.
	ACME      *ACMESpec `json:"acme,omitempty"`
	ListenTLS string    `json:"listen_tls,omitempty"`
	// Network is the Cluster network from this Machine's own record, e.g.
	// "10.210.0.0/16": no Container address outside it is proxied, whatever
	// a machines row claims (sdk/serving). Empty: not bounded by one.
	Network string `json:"network,omitempty"`
	// TrustedMachinesFile is the trust list ployzd keeps
	// (serving.TrustedMachines, /run/ployz/trusted-machines.json): a
	// Container address is taken only from a Machine whose machines row
	// ployzd accepted, with that row's subnet. Empty, or no file there
	// yet: the machines table alone is taken, as before the list existed.
	TrustedMachinesFile string `json:"trusted_machines_file,omitempty"`
}

// NetworkPrefix is Network parsed (ParseSpec checked it); invalid when
// empty.
func (s Spec) NetworkPrefix() netip.Prefix {
	p, err := netip.ParsePrefix(s.Network)
	if err != nil {
		return netip.Prefix{}
	}
	return p.Masked()
}

// ParseSpec decodes and validates an ingress.json document, filling
// defaults. Errors name the offending field.
func ParseSpec(b []byte) (Spec, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return Spec{}, fmt.Errorf("ingress spec: %w", err)
	}
	if strings.TrimSpace(s.Machine) == "" {
		return Spec{}, fieldErr("machine", "is empty")
	}
	if _, p, err := net.SplitHostPort(s.Listen); err != nil || p == "" || p == "0" {
		return Spec{}, fieldErr("listen", fmt.Sprintf("%q is not a [host]:port", s.Listen))
	}
	if s.TrustedMachinesFile != "" && !filepath.IsAbs(s.TrustedMachinesFile) {
		return Spec{}, fieldErr("trusted_machines_file", fmt.Sprintf("%q is not an absolute path", s.TrustedMachinesFile))
	}
	if err := serving.CheckStoreAPI(s.StoreAPI); err != nil {
		return Spec{}, fieldErr("store_api", err.Error())
	}
	if err := s.checkTLS(); err != nil {
		return Spec{}, err
	}
	if s.Network != "" {
		if p, err := netip.ParsePrefix(s.Network); err != nil || !p.Addr().Is4() {
			return Spec{}, fieldErr("network", fmt.Sprintf("%q is not an IPv4 prefix", s.Network))
		}
	}
	if s.StatusFile == "" {
		s.StatusFile = DefaultStatusPath
	}
	if s.StateDir == "" {
		s.StateDir = DefaultStateDir
	}
	return s, nil
}

// LoadSpec reads and parses the spec at path.
func LoadSpec(path string) (Spec, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, nil, fmt.Errorf("ingress spec: %w", err)
	}
	s, err := ParseSpec(b)
	if err != nil {
		return Spec{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, b, nil
}

func fieldErr(field, msg string) error {
	return fmt.Errorf("ingress spec: field %q %s", field, msg)
}

// Capabilities an ingress plugin advertises in Info, and Machine RPCs that
// need one are refused without it (details.capability).
const (
	// CapHTTP: HTTP hostnames routed to ready Containers.
	CapHTTP = "ployz.ingress.http.v1"
	// CapTLS: HTTPS with certificates from an ACME directory.
	CapTLS = "ployz.ingress.tls.v1"
	// CapTCP: TCP ports routed to ready Containers.
	CapTCP = "ployz.ingress.tcp.v1"
	// CapRoutes: HTTP routes with a path prefix (longest match, optional
	// strip), wildcard hostnames, and the redirect to HTTPS once a
	// certificate is loaded (paths.go). An ingress without it serves a
	// path route as its whole hostname, so ployz refuses to deploy one
	// while a Machine's ingress lacks it.
	CapRoutes = "ployz.ingress.routes.v1"
	// CapRedirects: HTTP routes with redirect_to answer 308 to their
	// canonical hostname. An ingress without it would proxy the
	// redirecting hostname to the Container, so ployz refuses to deploy
	// such a route while a Machine's ingress lacks it.
	CapRedirects = "ployz.ingress.redirects.v1"
	// CapSealedKeys: reads certificate private keys sealed with the
	// Cluster key (docs/security.md). Keys are sealed in the store only
	// once every participating Machine running an ingress advertises it.
	CapSealedKeys = "ployz.ingress.sealed-keys.v1"
	// CapUpstreamProtocol: a route's upstream_protocol (h2c) is honoured.
	// An ingress without it reaches such a Container over HTTP/1.1,
	// which an h2c-only server refuses, so ployz refuses to deploy one
	// while a Machine's ingress lacks it.
	CapUpstreamProtocol = "ployz.ingress.upstream-protocol.v1"
	// CapTLSOnDemand: a wildcard route's tls: on_demand is honoured: a
	// name under it gets a certificate at its first handshake, asked
	// from this Machine's route table. Offered with TLS.
	CapTLSOnDemand = "ployz.ingress.tls-on-demand.v1"
)

// Capabilities returns what an ingress serving s offers: HTTP, TCP and
// path routes, redirects and upstream protocols always, TLS when s turns HTTPS on, sealed keys when s names
// the Cluster secret that opens them. A nil s (not configured yet) offers
// HTTP, TCP and path routes, which it will serve once configured.
func Capabilities(s *Spec) []string {
	caps := []string{CapHTTP, CapTCP, CapRoutes, CapRedirects, CapUpstreamProtocol}
	if s != nil && s.ACME != nil {
		caps = append(caps, CapTLS, CapTLSOnDemand)
	}
	if s != nil && s.ClusterSecretFile != "" {
		caps = append(caps, CapSealedKeys, CapSealedAuth)
		if s.ACME != nil {
			caps = append(caps, CapUserCerts, CapDNS01) // DNS-01 opens the providers' sealed secrets
		}
	}
	return caps
}
