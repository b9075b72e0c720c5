package proxy

import (
	"bufio"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// An upgraded connection is two byte pipes the standard library's
// ReverseProxy copies between. To end a WebSocket cleanly the proxy
// writes a close frame into each pipe, which it may only do between two
// frames: each direction's frames are tracked (their headers parsed,
// their payloads counted), and the close frame goes in only at a
// boundary. A pipe caught in the middle of a frame is closed without one
// (as the Container stopping would have). Other upgrades are just closed.

// wsGoingAway is the status a retired WebSocket is closed with (RFC 6455
// 7.4.1: the server is going away).
const wsGoingAway = 1001

// wsLinger bounds the wait for the client to read the close frame and
// close its side.
const wsLinger = time.Second

// wsPair is one upgraded request's connections.
type wsPair struct {
	websocket bool // Upgrade: websocket (else: close without frames)

	mu      sync.Mutex
	backend *backendConn // the upstream's side, set by the 101 response
	closing bool         // retired: the client's side gets a close frame when it closes
}

func newWSPair(r *http.Request) *wsPair {
	return &wsPair{websocket: strings.EqualFold(r.Header.Get("Upgrade"), "websocket")}
}

// switched reports whether the upstream answered 101.
func (p *wsPair) switched() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.backend != nil
}

// goingAway sends the upstream a close frame (when at a frame boundary)
// and closes its connection; the ReverseProxy then closes the client's,
// which sends the client its close frame first (clientConn.Close).
func (p *wsPair) goingAway() {
	p.mu.Lock()
	p.closing = true
	b := p.backend
	p.mu.Unlock()
	b.goingAway(p.websocket)
}

// backendConn is the upstream's side of an upgrade: what the client sends
// is written here (client frames, masked).
type backendConn struct {
	rwc io.ReadWriteCloser
	p   *wsPair

	mu     sync.Mutex
	frames frameEdge
	closed bool
}

func (b *backendConn) Read(p []byte) (int, error) { return b.rwc.Read(p) }

func (b *backendConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, net.ErrClosed
	}
	n, err := b.rwc.Write(p)
	b.frames.feed(p[:n])
	return n, err
}

func (b *backendConn) Close() error { return b.rwc.Close() }

// goingAway writes a masked close frame (when at a boundary) and closes.
func (b *backendConn) goingAway(websocket bool) {
	b.mu.Lock()
	if !b.closed && websocket && b.frames.atBoundary() {
		_, _ = b.rwc.Write(closeFrame(wsGoingAway, true))
	}
	b.closed = true
	b.mu.Unlock()
	b.rwc.Close()
}

// hijackWriter hands the ReverseProxy the client's connection wrapped in
// a clientConn.
type hijackWriter struct {
	http.ResponseWriter
	p *wsPair
}

func (w hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return c, brw, err
	}
	return &clientConn{Conn: c, p: w.p}, brw, nil
}

// clientConn is the client's side of an upgrade: what the upstream sends
// is written here (server frames, unmasked).
type clientConn struct {
	net.Conn
	p *wsPair

	mu     sync.Mutex
	frames frameEdge
	closed bool
}

func (c *clientConn) Write(p []byte) (int, error) {
	c.p.mu.Lock()
	closing := c.p.closing && c.p.websocket
	c.p.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Once retired, nothing more from the upstream starts a frame: its
	// answer to the proxy's close frame (1000) would otherwise reach the
	// client before the proxy's own 1001 whenever it arrived before the
	// upstream's connection was closed.
	if c.closed || closing && c.frames.atBoundary() {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Write(p)
	c.frames.feed(p[:n])
	return n, err
}

// Close sends a retired WebSocket's client its close frame (at a frame
// boundary), lets it read it, then closes.
func (c *clientConn) Close() error {
	c.p.mu.Lock()
	closing := c.p.closing
	c.p.mu.Unlock()
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	if first && closing && c.p.websocket && c.frames.atBoundary() {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(wsLinger))
		if _, err := c.Conn.Write(closeFrame(wsGoingAway, false)); err == nil {
			c.linger()
		}
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// linger half-closes and reads what the client still sends until it
// closes too (its close frame answering ours) or wsLinger passes: closing
// with unread input would reset the connection, and a reset may discard
// the close frame before the client reads it.
func (c *clientConn) linger() {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return
	}
	if cw.CloseWrite() != nil {
		return
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(wsLinger))
	_, _ = io.Copy(io.Discard, c.Conn)
}

// closeFrame is a close frame with code; masked for the upstream (a
// client's frames are masked, RFC 6455 5.3).
func closeFrame(code uint16, masked bool) []byte {
	payload := []byte{byte(code >> 8), byte(code)}
	if !masked {
		return append([]byte{0x88, byte(len(payload))}, payload...)
	}
	var key [4]byte
	_, _ = rand.Read(key[:])
	f := append([]byte{0x88, 0x80 | byte(len(payload))}, key[:]...)
	for i, b := range payload {
		f = append(f, b^key[i%4])
	}
	return f
}

// frameEdge follows one direction of a WebSocket to know whether the
// bytes so far end on a frame boundary (RFC 6455 5.2).
type frameEdge struct {
	hdr  [14]byte // a header being read
	hn   int
	left uint64 // payload bytes of the current frame still to come
}

func (f *frameEdge) atBoundary() bool { return f.hn == 0 && f.left == 0 }

func (f *frameEdge) feed(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			k := uint64(len(p))
			if k > f.left {
				k = f.left
			}
			f.left -= k
			p = p[k:]
			continue
		}
		f.hdr[f.hn] = p[0]
		f.hn++
		p = p[1:]
		if need := headerLen(f.hdr[:f.hn]); need == f.hn {
			f.left = payloadLen(f.hdr[:f.hn])
			f.hn = 0
		}
	}
}

// headerLen is the length of a frame header given its first bytes (at
// least 2 needed; 2 is returned until then).
func headerLen(h []byte) int {
	if len(h) < 2 {
		return 2
	}
	n := 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4
	}
	return n
}

func payloadLen(h []byte) uint64 {
	switch l := h[1] & 0x7f; l {
	case 126:
		return uint64(h[2])<<8 | uint64(h[3])
	case 127:
		var n uint64
		for _, b := range h[2:10] {
			n = n<<8 | uint64(b)
		}
		return n
	default:
		return uint64(l)
	}
}
