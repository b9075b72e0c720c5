package rpc

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// PhaseParticipating is the machines-row phase of a Machine whose calls
// the mesh listener accepts.
const PhaseParticipating = "participating"

// meshAuth admits a mesh caller only when the key of its TLS client
// certificate is the rpc_key of a participating Machine in this Machine's
// machines table and the connection comes from that Machine's
// management address. WireGuard's cryptokey routing binds that address
// to the Machine's WireGuard key, so the caller proves both keys.
type meshAuth struct {
	peers Peers

	mu      sync.Mutex
	byKey   map[string]Peer
	fetched time.Time
}

// How long a machines-table read serves authorization (a forgotten or
// reset Machine is refused at most this late); an unknown key refreshes
// it sooner, at most every authRetry. Variables for tests.
var (
	authTTL   = 5 * time.Second
	authRetry = 500 * time.Millisecond
)

func (a *meshAuth) lookup(ctx context.Context, key string) (Peer, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.byKey[key]
	age := time.Since(a.fetched)
	if (ok && age < authTTL) || (!ok && age < authRetry) {
		return p, ok, nil
	}
	peers, err := a.peers(ctx)
	if err != nil {
		return Peer{}, false, err
	}
	a.byKey = map[string]Peer{}
	for _, q := range peers {
		if q.RPCKey != "" {
			a.byKey[q.RPCKey] = q
		}
	}
	a.fetched = time.Now()
	p, ok = a.byKey[key]
	return p, ok, nil
}

// authorize returns nil for an admitted caller, else a gRPC status error
// saying why it was refused.
func (a *meshAuth) authorize(ctx context.Context) error {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return status.Error(codes.Unauthenticated, "machine rpc: no peer information on this connection")
	}
	return a.check(ctx, pr.Addr, pr.AuthInfo)
}

// check admits a connection from addr with TLS state info, as authorize
// does; the gate asks it once per connection after the handshake.
func (a *meshAuth) check(ctx context.Context, addr net.Addr, auth credentials.AuthInfo) error {
	info, ok := auth.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return status.Error(codes.Unauthenticated, "machine rpc on the mesh accepts only Cluster Machines presenting their RPC identity certificate; "+
			"operators connect over SSH (ssh://) or the local unix socket")
	}
	k, ok := info.State.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
	if !ok {
		return status.Errorf(codes.Unauthenticated, "machine rpc: client certificate key is %T, want an Ed25519 RPC identity", info.State.PeerCertificates[0].PublicKey)
	}
	key := EncodeRPCKey(k)
	m, ok, err := a.lookup(ctx, key)
	if err != nil {
		return status.Errorf(codes.Unavailable, "machine rpc: cannot read the machines table to authorize the caller: %v", err)
	}
	if !ok {
		return status.Errorf(codes.PermissionDenied, "machine rpc: RPC key %s belongs to no Machine in this Machine's machines table", KeyFingerprint(k))
	}
	if m.Phase != PhaseParticipating {
		return status.Errorf(codes.PermissionDenied, "machine rpc: machine %s (%s) is %q, not participating", m.Name, short(m.ID), m.Phase)
	}
	src := addrOf(addr)
	want := hostOf(m.Address)
	if !src.IsValid() || !want.IsValid() || src != want {
		return status.Errorf(codes.PermissionDenied, "machine rpc: the RPC key of machine %s (%s) was presented from %v, but its management address is %v",
			m.Name, short(m.ID), src, want)
	}
	return nil
}

func addrOf(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

func hostOf(hostport string) netip.Addr {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func (a *meshAuth) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if err := a.authorize(ctx); err != nil {
		return nil, err
	}
	return next(ctx, req)
}

func (a *meshAuth) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	if err := a.authorize(ss.Context()); err != nil {
		return err
	}
	return next(srv, ss)
}

// serverTLS asks every client for a certificate but verifies none in the
// handshake: the interceptors refuse with a gRPC status that names the
// reason, which a failed handshake could not.
func serverTLS(id *Identity) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{id.cert},
		ClientAuth:   tls.RequestClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

// clientTLS presents id and accepts the server only if its certificate's
// key is want, the rpc_key its Machine row publishes.
func clientTLS(id *Identity, want ed25519.PublicKey, who string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{id.cert},
		MinVersion:   tls.VersionTLS13,
		// The chain is not what is trusted; VerifyPeerCertificate checks
		// the key against the machines table instead.
		InsecureSkipVerify: true, // verified below by key
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return fmt.Errorf("%s presented no certificate", who)
			}
			got, err := certKey(raw[0])
			if err != nil {
				return fmt.Errorf("%s: %w", who, err)
			}
			if !got.Equal(want) {
				return fmt.Errorf("%s answered with RPC key %s, but its machines row publishes %s", who, KeyFingerprint(got), KeyFingerprint(want))
			}
			return nil
		},
	}
}

// MeshDialer dials peers' Machine RPC on the mesh as this Machine.
type MeshDialer struct {
	Identity *Identity
	// Source is this Machine's management address. Calls leave from it
	// because it is the address peers admit this Machine's key from.
	Source netip.Addr

	wrap func(net.Conn) net.Conn // tests: wraps each dialed connection
}

// Dial returns a Client for p's Machine RPC on the mesh, presenting the
// identity and verifying that p answers with its published rpc_key.
func (m MeshDialer) Dial(_ context.Context, p Peer) (*Client, error) {
	who := fmt.Sprintf("machine %s (%s)", p.Name, short(p.ID))
	if p.RPCKey == "" {
		return nil, fmt.Errorf("%s publishes no rpc_key (a ployzd from before authenticated Machine RPC?); refusing to call it unauthenticated", who)
	}
	want, err := ParseRPCKey(p.RPCKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", who, err)
	}
	addr := p.Address
	d := net.Dialer{Timeout: 5 * time.Second}
	if m.Source.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: m.Source.AsSlice()}
	}
	return newClient(func(ctx context.Context) (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil && m.wrap != nil {
			c = m.wrap(c)
		}
		return c, err
	}, credentials.NewTLS(clientTLS(m.Identity, want, who)))
}
