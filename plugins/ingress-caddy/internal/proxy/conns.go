package proxy

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// caddy.Stop starts the servers' graceful shutdown but, unless Caddy
// itself is exiting the process, does not wait for it: a proxy that
// returned right away would cut requests in flight (and connections it
// accepted but has not answered) when it restarts. This listener wrapper
// counts open connections so Serve can wait for them after Stop.
func init() { caddy.RegisterModule(connTracker{}) }

// connTracker is the listener wrapper "ployz_conns" (caddyconfig.ConnWrapper).
type connTracker struct{}

// CaddyModule implements caddy.Module.
func (connTracker) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.listeners.ployz_conns", New: func() caddy.Module { return new(connTracker) }}
}

// WrapListener implements caddy.ListenerWrapper.
func (connTracker) WrapListener(l net.Listener) net.Listener {
	return &trackedListener{Listener: l, closed: make(chan struct{}), seq: listenerSeq.Add(1)}
}

var openConns atomic.Int64

// Lame duck: a stopping proxy first stops accepting (new connections
// wait in the kernel's queue of the socket parked in systemd's fd store,
// for the next process) and answers every request with "Connection:
// close" for lameDuck, so each client in the middle of using a keep-alive
// connection learns from an answer that it must reconnect. Only then do
// the servers shut down, which closes idle connections: by then only
// clients idle for the whole lameDuck can meet a closed connection. Go's
// server never answers a request that arrives once it shuts down, so
// without this, any client sending at that moment fails. A reload does
// the same before Caddy replaces its servers; the new servers accept the
// connections that waited.
//
// After a handoff (a successor already accepts on the same sockets) the
// lame duck lasts at least lameDuck and then until every connection the
// servers accepted has been answered "Connection: close" (and so closed),
// for at most lameDuckMax: a client that round-robins over several
// Machines leaves its connection to this one idle while it waits on the
// others, and one idle past a fixed second met the close (an upgrade
// under load lost one POST that way). On a stop or reload nobody accepts
// meanwhile, so new connections wait in the queue: it stays one second.
const (
	lameDuck    = time.Second
	lameDuckMax = 5 * time.Second
)

// successorServes is set once a handoff's successor serves the sockets.
var successorServes atomic.Bool

// draining makes routeHandler answer "Connection: close".
var draining atomic.Bool

// gate holds back the Accept of every listener wrapped before it was
// set (the servers being replaced or stopped) until the listener closes
// or the gate opens (a reload Caddy refused: the old servers go on).
type gate struct {
	before uint64
	open   chan struct{}
}

var (
	listenerSeq atomic.Uint64
	acceptGate  atomic.Pointer[gate]
)

// lameDuckPause runs the lame duck and returns the function that opens
// the gate again, to call once Caddy has replaced (or kept) its servers.
func lameDuckPause() (reopen func()) {
	g := &gate{before: listenerSeq.Load() + 1, open: make(chan struct{})}
	acceptGate.Store(g)
	draining.Store(true)
	time.Sleep(lameDuck)
	if successorServes.Load() {
		waitConns(lameDuckMax - lameDuck)
	}
	draining.Store(false)
	return func() {
		acceptGate.CompareAndSwap(g, nil)
		close(g.open)
	}
}

type trackedListener struct {
	net.Listener
	seq    uint64
	closed chan struct{}
	once   sync.Once
}

func (l *trackedListener) Accept() (net.Conn, error) {
	if g := acceptGate.Load(); g != nil && l.seq < g.before {
		select {
		case <-l.closed:
			return nil, net.ErrClosed
		case <-g.open:
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	openConns.Add(1)
	if st, ok := c.(connStater); ok {
		return &trackedTLSConn{trackedConn: trackedConn{Conn: c}, state: st}, nil
	}
	return &trackedConn{Conn: c}, nil
}

func (l *trackedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type trackedConn struct {
	net.Conn
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { openConns.Add(-1) })
	return c.Conn.Close()
}

// CloseWrite half-closes the connection when it can (a retired
// WebSocket's linger, websocket.go).
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// connStater is a TLS connection (Caddy's connectionStater).
type connStater interface{ ConnectionState() tls.ConnectionState }

// trackedTLSConn keeps a TLS connection's state visible through the
// wrapper: without it Caddy leaves r.TLS nil on HTTPS requests, so an
// answer could not tell HTTPS from HTTP (a redirect keeping the scheme,
// X-Forwarded-Proto).
type trackedTLSConn struct {
	trackedConn
	state connStater
}

// ConnectionState implements Caddy's connectionStater.
func (c *trackedTLSConn) ConnectionState() tls.ConnectionState { return c.state.ConnectionState() }

// waitConns waits until every connection the servers accepted is closed,
// or d passed; it returns how many were still open.
func waitConns(d time.Duration) int64 {
	deadline := time.Now().Add(d)
	for openConns.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return openConns.Load()
}

var (
	_ caddy.ListenerWrapper = connTracker{}
	_ net.Listener          = (*trackedListener)(nil)
	_ caddy.Module          = connTracker{}
)
