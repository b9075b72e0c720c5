package proxy

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// A minimal RFC 6455 client and echo server for the tests and
// benchmarks: no WebSocket library is in the module graph, and the
// proxy's own frame tracking must be checked against frames written as
// the RFC says, not against the proxy's code.

const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// wsFrame is one frame: opcode and payload (unfragmented).
type wsFrame struct {
	op      byte
	payload []byte
}

func (f wsFrame) closeCode() int {
	if f.op != 0x8 || len(f.payload) < 2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(f.payload))
}

func writeFrame(w io.Writer, op byte, payload []byte, masked bool) error {
	h := []byte{0x80 | op}
	mask := byte(0)
	if masked {
		mask = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		h = append(h, mask|byte(n))
	case n < 1<<16:
		h = append(h, mask|126, byte(n>>8), byte(n))
	default:
		h = append(h, mask|127)
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	body := payload
	if masked {
		var key [4]byte
		rand.Read(key[:])
		h = append(h, key[:]...)
		body = make([]byte, len(payload))
		for i, b := range payload {
			body[i] = b ^ key[i%4]
		}
	}
	_, err := w.Write(append(h, body...))
	return err
}

func readFrame(r *bufio.Reader) (wsFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return wsFrame{}, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return wsFrame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return wsFrame{}, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	var key [4]byte
	if h[1]&0x80 != 0 {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return wsFrame{}, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return wsFrame{}, err
	}
	if h[1]&0x80 != 0 {
		for i := range p {
			p[i] ^= key[i%4]
		}
	}
	return wsFrame{op: h[0] & 0x0f, payload: p}, nil
}

// wsEcho is an upstream handler echoing every data frame; closed (when
// not nil) gets the close code the upstream receives.
func wsEcho(closed chan<- int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "want a WebSocket", http.StatusBadRequest)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			wsAccept(r.Header.Get("Sec-WebSocket-Key")))
		rw.Flush()
		for {
			f, err := readFrame(rw.Reader)
			if err != nil {
				if closed != nil {
					closed <- -1 // no close frame
				}
				return
			}
			if f.op == 0x8 {
				if closed != nil {
					closed <- f.closeCode()
				}
				writeFrame(c, 0x8, f.payload, false)
				return
			}
			if err := writeFrame(c, f.op, f.payload, false); err != nil {
				return
			}
		}
	}
}

// wsConn is the client's end of a WebSocket.
type wsConn struct {
	c net.Conn
	r *bufio.Reader
}

// wsDial opens a WebSocket to addr with Host host and path.
func wsDial(addr, host, path string) (*wsConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return wsHandshake(c, host, path)
}

// wsHandshake opens a WebSocket on an established connection c.
func wsHandshake(c net.Conn, host, path string) (*wsConn, error) {
	var k [16]byte
	rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		path, host, key)
	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		c.Close()
		return nil, fmt.Errorf("handshake answered %d %q", res.StatusCode, b)
	}
	return &wsConn{c: c, r: r}, nil
}

func (w *wsConn) send(msg string) error { return writeFrame(w.c, 0x1, []byte(msg), true) }

// next reads the next frame within d.
func (w *wsConn) next(d time.Duration) (wsFrame, error) {
	w.c.SetReadDeadline(time.Now().Add(d))
	return readFrame(w.r)
}

// echo sends msg and reads its echo.
func (w *wsConn) echo(msg string) error {
	if err := w.send(msg); err != nil {
		return err
	}
	f, err := w.next(5 * time.Second)
	if err != nil {
		return err
	}
	if f.op != 0x1 || string(f.payload) != msg {
		return fmt.Errorf("echo of %q: opcode %d %q", msg, f.op, f.payload)
	}
	return nil
}
