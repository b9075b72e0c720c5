package proxy

import (
	"context"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/acme"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// certificates is the proxy's side of HTTPS: nil when the spec has no
// acme field (HTTPS off), else an ACME manager running for Serve's life.
type certificates struct {
	m      *acme.Manager
	cancel context.CancelFunc
}

// stop ends the manager (Serve returns).
func (c *certificates) stop() {
	if c != nil {
		onDemandACME.CompareAndSwap(c.m, nil)
		c.cancel()
	}
}

// startCertificates starts the ACME manager the spec asks for; store
// overrides the spec's store and mod adjusts the config (tests). A nil
// result serves HTTP only.
func startCertificates(ctx context.Context, spec ingress.Spec, st acme.Store, log hclog.Logger, mod func(*acme.Config)) (*certificates, error) {
	if spec.ACME == nil {
		return nil, nil
	}
	if st == nil {
		st = acme.TokenFileStore{TokenFileClient: store.NewTokenFileClient(spec.StoreAPI, spec.StoreTokenFile)} // followed by subscription
	}
	keys, err := acme.LoadSealer(spec.ClusterSecretFile)
	if err != nil {
		return nil, err
	}
	cfg := acme.Config{
		Machine: spec.Machine, Directory: spec.ACME.Directory, CAFile: spec.ACME.CAFile, Email: spec.ACME.Email,
		ListenTLS: spec.ListenTLS, StateDir: filepath.Join(spec.StateDir, "ployz"),
		RankDelay: time.Duration(spec.ACME.RankDelaySeconds) * time.Second,
		Store:     st, Log: log.Named("acme"), Keys: keys,
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := acme.New(cfg)
	if err != nil {
		return nil, err
	}
	onDemandACME.Store(m) // Caddy's on-demand handshakes ask it (ondemand.go)
	ctx, cancel := context.WithCancel(ctx)
	go m.Run(ctx) // it ends with ctx
	log.Info("https on", "listen_tls", spec.ListenTLS, "directory", spec.ACME.Directory)
	return &certificates{m: m, cancel: cancel}, nil
}

// tls hands the routed hostnames (published or pending) to the manager
// and returns the TLS input of the Caddy config. A wildcard is served
// from a user certificate, or issued with DNS-01 when a DNS provider's
// zone covers it: HTTP-01 cannot validate one.
func (c *certificates) tls(routes []ingress.Route) caddyconfig.TLS {
	if c == nil {
		return caddyconfig.TLS{}
	}
	c.m.Want(certHostnames(routes))
	ws := onDemandWildcards(routes)
	c.m.AllowOnDemand(ws)
	t := c.m.Snapshot().TLS
	t.OnDemand = ws
	return t
}

// certHostnames are the hostnames of the HTTP routes published or
// pending, redirecting ones (redirect_from) and wildcards included (the
// manager serves a wildcard from a user certificate, or issues it with
// DNS-01 through a DNS provider).
func certHostnames(routes []ingress.Route) []string {
	var hs []string
	for _, r := range routes {
		if r.Hostname != "" && r.Protocol == "" && (r.State == ingress.RoutePublished || r.State == ingress.RoutePending) {
			hs = append(hs, r.Hostname)
		}
	}
	return hs
}

// refresh has the manager read the store now (the first load waits for
// it, so a restarted proxy serves HTTPS at once).
func (c *certificates) refresh(ctx context.Context) {
	if c != nil {
		c.m.Refresh(ctx)
	}
}

// changed receives when the manager has new TLS input; nil (never) when
// HTTPS is off.
func (c *certificates) changed() <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.m.Changed()
}

// status fills the status file's HTTPS fields.
func (c *certificates) status(st *ingress.Status) {
	if c == nil {
		return
	}
	s := c.m.Snapshot()
	st.ListenTLS = s.TLS.Listen
	st.Certificates, st.SkippedCertificates = s.States, s.Skipped
}
