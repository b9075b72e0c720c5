package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/caddyserver/certmagic"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/acme"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

// On-demand TLS: Caddy's handshake asks the modules here for a name under
// a wildcard route with tls on_demand that no loaded certificate covers.
// The permission comes from the ACME manager's allowed wildcards, set
// from this proxy's routes (never from the client: any other SNI fails
// its handshake without an order), and new names are rate limited.

func init() {
	caddy.RegisterModule(onDemandPermission{})
	caddy.RegisterModule(onDemandManager{})
	caddy.RegisterModule(refuseIssuer{})
}

// onDemandACME is the ACME manager of the running Serve (nil: HTTPS off).
var onDemandACME atomic.Pointer[acme.Manager]

// OnDemandWait bounds a handshake's wait for its on-demand certificate.
var OnDemandWait = 90 * time.Second

// onDemandLimit admits at most onDemandBurst new names at once, then one
// per onDemandEvery: a flood of made-up names under a wildcard cannot
// turn into a flood of orders.
var onDemandLimit = newBucket(10, 6*time.Second)

// onDemandWildcards are the wildcards of routes published or pending
// with tls on_demand.
func onDemandWildcards(routes []ingress.Route) []string {
	var ws []string
	for _, r := range routes {
		if r.Protocol == "" && r.TLS == routeopt.TLSOnDemand && ingress.IsWildcard(r.Hostname) &&
			(r.State == ingress.RoutePublished || r.State == ingress.RoutePending) {
			ws = append(ws, r.Hostname)
		}
	}
	return ws
}

// onDemandPermission is Caddy's tls.permission.ployz_routes.
type onDemandPermission struct{}

// CaddyModule implements caddy.Module.
func (onDemandPermission) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.permission." + caddyconfig.OnDemandPermission, New: func() caddy.Module { return new(onDemandPermission) }}
}

// CertificateAllowed implements caddytls.OnDemandPermission.
func (onDemandPermission) CertificateAllowed(_ context.Context, name string) error {
	if m := onDemandACME.Load(); m != nil && m.OnDemandAllowed(strings.ToLower(name)) {
		return nil
	}
	return fmt.Errorf("%w: %s is under no wildcard route with tls on_demand", caddytls.ErrPermissionDenied, name)
}

// onDemandManager is Caddy's tls.get_certificate.ployz_on_demand: it
// always answers a certificate or an error, so Caddy never turns to its
// own issuers.
type onDemandManager struct{}

// CaddyModule implements caddy.Module.
func (onDemandManager) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.get_certificate." + caddyconfig.OnDemandManager, New: func() caddy.Module { return new(onDemandManager) }}
}

// GetCertificate implements certmagic.Manager.
func (onDemandManager) GetCertificate(ctx context.Context, hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(hello.ServerName)
	m := onDemandACME.Load()
	if m == nil || !m.OnDemandAllowed(name) {
		return nil, fmt.Errorf("no on-demand certificate for %q: under no wildcard route with tls on_demand", name)
	}
	if c, ok := m.Loaded(name); ok {
		return c, nil
	}
	if !onDemandLimit.take(time.Now()) {
		return nil, fmt.Errorf("no on-demand certificate for %q: rate limited (new names come one per %s)", name, onDemandLimit.every)
	}
	ctx, cancel := context.WithTimeout(ctx, OnDemandWait)
	defer cancel()
	return m.Obtain(ctx, name)
}

// refuseIssuer is Caddy's tls.issuance.ployz_refuse: certificates come
// from the proxy's ACME manager only.
type refuseIssuer struct{}

// CaddyModule implements caddy.Module.
func (refuseIssuer) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.issuance." + caddyconfig.RefuseIssuer, New: func() caddy.Module { return new(refuseIssuer) }}
}

// Issue implements certmagic.Issuer.
func (refuseIssuer) Issue(context.Context, *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	return nil, errors.New("ployz: Caddy issues nothing itself; certificates come from the Cluster's ACME manager")
}

// IssuerKey implements certmagic.Issuer.
func (refuseIssuer) IssuerKey() string { return caddyconfig.RefuseIssuer }

// bucket is a token bucket: burst tokens, one more per every.
type bucket struct {
	mu     sync.Mutex
	burst  float64
	tokens float64
	every  time.Duration
	last   time.Time
}

func newBucket(burst int, every time.Duration) *bucket {
	return &bucket{burst: float64(burst), tokens: float64(burst), every: every}
}

func (b *bucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+float64(now.Sub(b.last))/float64(b.every))
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

var (
	_ caddytls.OnDemandPermission = onDemandPermission{}
	_ certmagic.Manager           = onDemandManager{}
	_ certmagic.Issuer            = refuseIssuer{}
)
