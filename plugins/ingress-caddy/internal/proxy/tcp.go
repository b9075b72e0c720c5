package proxy

import (
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/mholt/caddy-l4/layer4"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
)

// TCP routes: caddy-l4 owns the listeners (one server per routed port),
// this handler picks the upstream from the routing table per connection,
// so upstream changes never reload Caddy.
const (
	// tcpDialTimeout bounds one upstream dial before the next is tried.
	tcpDialTimeout = 2 * time.Second
	// L4Drain is how long a connection to an upstream the table no longer
	// routes to (its Container retired) may stay open before it is closed.
	L4Drain = 30 * time.Second
)

func init() { caddy.RegisterModule(tcpHandler{}) }

// tcpHandler is the layer4 handler "ployz_tcp" (caddyconfig.TCPHandler).
type tcpHandler struct {
	Port int `json:"port"`
}

// CaddyModule implements caddy.Module.
func (tcpHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "layer4.handlers." + caddyconfig.TCPHandler, New: func() caddy.Module { return new(tcpHandler) }}
}

// Handle implements layer4.NextHandler: dial the route's upstreams in
// order (ejected ones last) until one answers, then copy both ways.
func (h tcpHandler) Handle(cx *layer4.Connection, _ layer4.Handler) error {
	t := table.Load()
	var rt *tcpRoute
	if t != nil {
		rt = t.tcp[h.Port]
	}
	if rt == nil {
		return fmt.Errorf("port %d: no route", h.Port)
	}
	var (
		up      net.Conn
		addr    string
		lastErr error
	)
	for _, d := range rt.order(time.Now()) {
		c, err := net.DialTimeout("tcp", d, tcpDialTimeout)
		if err != nil {
			eject(d, err)
			lastErr = err
			continue
		}
		up, addr = c, d
		break
	}
	if up == nil {
		return fmt.Errorf("port %d: no upstream answered: %w", h.Port, lastErr)
	}
	tc := &tcpConn{down: cx, up: up}
	key := tcpKey{h.Port, addr}
	tcpConns.add(key, tc)
	defer tcpConns.remove(key, tc)
	splice(cx, up)
	return nil
}

// splice copies both ways; each direction's end half-closes the other
// side, and both conns are closed when both directions ended.
func splice(down, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src) // either side may reset
		closeWrite(dst)
	}
	go pipe(up, down)
	go pipe(down, up)
	wg.Wait()
	up.Close()
	down.Close()
}

func closeWrite(c net.Conn) {
	if cx, ok := c.(*layer4.Connection); ok {
		c = cx.Conn
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

type tcpKey struct {
	port int
	addr string
}

type tcpConn struct{ down, up net.Conn }

func (c *tcpConn) close() {
	c.up.Close()
	c.down.Close()
}

// conns are the open TCP connections by route and upstream.
type conns struct {
	mu sync.Mutex
	m  map[tcpKey]map[*tcpConn]bool
}

var tcpConns = &conns{m: map[tcpKey]map[*tcpConn]bool{}}

func (c *conns) add(k tcpKey, tc *tcpConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[k] == nil {
		c.m[k] = map[*tcpConn]bool{}
	}
	c.m[k][tc] = true
}

func (c *conns) remove(k tcpKey, tc *tcpConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m[k], tc)
	if len(c.m[k]) == 0 {
		delete(c.m, k)
	}
}

func (c *conns) count(k tcpKey) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m[k])
}

// closeRetired closes k's connections unless the table routes to k again.
func (c *conns) closeRetired(k tcpKey) {
	if t := table.Load(); t != nil && t.tcp[k.port] != nil && slices.Contains(t.tcp[k.port].dials, k.addr) {
		return
	}
	c.mu.Lock()
	var open []*tcpConn
	for tc := range c.m[k] {
		open = append(open, tc)
	}
	c.mu.Unlock()
	for _, tc := range open {
		tc.close()
	}
}

// drainFor is L4Drain; tests shorten it.
var drainFor = L4Drain

// retireTCP starts the drain window of every (port, upstream) prev
// routed and next does not.
func retireTCP(prev, next *routeTable) {
	if prev == nil {
		return
	}
	for port, r := range prev.tcp {
		var keep []string
		if n := next.tcp[port]; n != nil {
			keep = n.dials
		}
		for _, d := range r.dials {
			if slices.Contains(keep, d) {
				continue
			}
			k := tcpKey{port, d}
			if tcpConns.count(k) > 0 {
				time.AfterFunc(drainFor, func() { tcpConns.closeRetired(k) })
			}
		}
	}
}

var _ layer4.NextHandler = tcpHandler{}
