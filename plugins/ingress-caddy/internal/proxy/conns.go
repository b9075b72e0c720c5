package proxy

import (
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
func (connTracker) WrapListener(l net.Listener) net.Listener { return trackedListener{l} }

var openConns atomic.Int64

type trackedListener struct{ net.Listener }

func (l trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	openConns.Add(1)
	return &trackedConn{Conn: c}, nil
}

type trackedConn struct {
	net.Conn
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { openConns.Add(-1) })
	return c.Conn.Close()
}

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
	_ caddy.Module          = connTracker{}
)
