package rpc

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// Bounds on the mesh listener's connections that are not (yet) a
// participating Machine's. Variables for tests.
var (
	// handshakeDeadline bounds the TLS handshake and HTTP/2 preface of a
	// new connection.
	handshakeDeadline = handshakeTimeout
	// unauthGrace is how long a connection that completed TLS without a
	// participating Machine's key is kept: long enough for its first call
	// to be answered with why it is refused, then it is closed.
	unauthGrace = 5 * time.Second
	// maxPendingPerIP and maxPending cap connections in either state, per
	// source address and in all: a flood from one address cannot crowd out
	// another Machine's handshake.
	maxPendingPerIP = 16
	maxPending      = 256
)

// gate counts the unauthenticated connections per source address.
type gate struct {
	mu    sync.Mutex
	total int
	byIP  map[netip.Addr]int
}

func (g *gate) acquire(ip netip.Addr) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byIP[ip] >= maxPendingPerIP {
		return fmt.Errorf("machine rpc: %d unauthenticated connections from %v already; refused", g.byIP[ip], ip)
	}
	if g.total >= maxPending {
		return fmt.Errorf("machine rpc: %d unauthenticated connections already; refused one from %v", g.total, ip)
	}
	if g.byIP == nil {
		g.byIP = map[netip.Addr]int{}
	}
	g.byIP[ip]++
	g.total++
	return nil
}

func (g *gate) release(ip netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if g.byIP[ip]--; g.byIP[ip] <= 0 {
		delete(g.byIP, ip)
	}
}

// gatedCreds is the mesh listener's TLS with the gate in front: a
// connection holds a slot from accept until it proves to be a
// participating Machine's, and one that does not is closed after
// unauthGrace.
type gatedCreds struct {
	credentials.TransportCredentials
	gate *gate
	auth *meshAuth
}

func (c *gatedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	ip := addrOf(raw.RemoteAddr())
	if err := c.gate.acquire(ip); err != nil {
		raw.Close()
		return nil, nil, err
	}
	// gRPC clears the deadline once its HTTP/2 transport is up.
	_ = raw.SetDeadline(time.Now().Add(handshakeDeadline))
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		c.gate.release(ip)
		raw.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeDeadline)
	defer cancel()
	if c.auth.check(ctx, raw.RemoteAddr(), info) == nil {
		c.gate.release(ip)
		return conn, info, nil
	}
	h := &heldConn{Conn: conn, release: func() { c.gate.release(ip) }}
	h.timer = time.AfterFunc(unauthGrace, func() { h.Close() })
	return h, info, nil
}

func (c *gatedCreds) Clone() credentials.TransportCredentials {
	return &gatedCreds{TransportCredentials: c.TransportCredentials.Clone(), gate: c.gate, auth: c.auth}
}

// heldConn is an unauthenticated connection: it keeps its gate slot
// until it closes, by its peer, by gRPC or at unauthGrace.
type heldConn struct {
	net.Conn
	once    sync.Once
	timer   *time.Timer
	release func()
}

func (h *heldConn) Close() error {
	err := h.Conn.Close()
	h.once.Do(func() {
		h.timer.Stop()
		h.release()
	})
	return err
}
