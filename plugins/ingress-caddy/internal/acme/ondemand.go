package acme

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
)

// On-demand issuance: a name under a wildcard route with tls: on_demand
// is wanted from its first TLS handshake on this Machine (Obtain) for
// as long as a wildcard still allows it (AllowOnDemand). It is then an
// ordinary hostname: issued once for the Cluster into the store, loaded
// by every proxy that wants it, renewed while wanted. This Machine takes
// the first turn for the names it was asked for, since a client waits.

// AllowOnDemand sets the wildcards (lowercase "*.example.com") whose
// names may be obtained on demand; names asked before and no longer
// under one are no longer wanted.
func (m *Manager) AllowOnDemand(wildcards []string) {
	ws := slices.Clone(wildcards)
	slices.Sort(ws)
	m.mu.Lock()
	changed := !slices.Equal(ws, m.onDemand)
	m.onDemand = ws
	for h := range m.asked {
		if !coveredBy(ws, h) {
			delete(m.asked, h)
		}
	}
	m.mu.Unlock()
	if changed {
		m.poke()
	}
}

// OnDemandAllowed reports whether name may get a certificate on demand:
// a single DNS name one label under an allowed wildcard.
func (m *Manager) OnDemandAllowed(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return coveredBy(m.onDemand, name)
}

func coveredBy(wildcards []string, name string) bool {
	if name != strings.ToLower(name) || strings.Contains(name, "*") || ingress.ValidHostname(name) != nil {
		return false
	}
	_, base, ok := strings.Cut(name, ".")
	return ok && slices.Contains(wildcards, "*."+base)
}

// Loaded is the certificate the snapshot serves for exactly name, if any.
func (m *Manager) Loaded(name string) (*tls.Certificate, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.snap.TLS.Certificates {
		if c.Hostname == name {
			kp, err := tls.X509KeyPair([]byte(c.CertPEM), []byte(c.KeyPEM))
			return &kp, err == nil
		}
	}
	return nil, false
}

// Obtain wants name (which OnDemandAllowed must have allowed) and waits
// until its certificate is loaded, its issuance failed, or ctx ends.
func (m *Manager) Obtain(ctx context.Context, name string) (*tls.Certificate, error) {
	m.mu.Lock()
	if !coveredBy(m.onDemand, name) {
		m.mu.Unlock()
		return nil, fmt.Errorf("%s is under no wildcard route with tls on_demand", name)
	}
	if m.asked == nil {
		m.asked = map[string]bool{}
	}
	m.asked[name] = true
	m.mu.Unlock()
	m.poke()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, ok := m.Loaded(name); ok {
			return c, nil
		}
		if st, ok := m.state(name); ok && st.State == ingress.CertFailed {
			return nil, fmt.Errorf("on-demand certificate for %s: %s", name, st.Error)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("on-demand certificate for %s: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

func (m *Manager) state(name string) (ingress.CertificateState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.snap.States {
		if s.Hostname == name {
			return s, true
		}
	}
	return ingress.CertificateState{}, false
}

// wanted are the hostnames of the routes and the names asked on demand.
func (m *Manager) wanted() []string {
	if len(m.asked) == 0 {
		return m.want
	}
	hs := slices.Clone(m.want)
	for h := range m.asked {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	return slices.Compact(hs)
}
