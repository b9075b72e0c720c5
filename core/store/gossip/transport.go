package gossip

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	sockaddr "github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"

	"github.com/ployz/ployz/sdk/fdstore"
)

// udpRecvBuf is the receive buffer asked for (halved until the kernel
// takes it), as memberlist's own transport does: a burst of packets must
// not be dropped before they are read.
const udpRecvBuf = 2 << 20

// keptTransport is memberlist's network transport (UDP packets, a TCP
// connection per stream) over sockets this package binds itself instead
// of memberlist's NetTransport, which binds its own: under systemd they
// are kept in the fd store (Config.KeepAs), so a restart of the store
// never frees the gossip port for another local user to take.
type keptTransport struct {
	tcp      *net.TCPListener
	udp      *net.UDPConn
	packets  chan *memberlist.Packet
	streams  chan net.Conn
	log      hclog.Logger
	wg       sync.WaitGroup
	shutdown atomic.Bool
}

// listenGossip binds TCP and UDP on the same host:port (port 0 picks one
// free for both), kept under keepAs when that is set.
func listenGossip(bind, keepAs string) (*net.TCPListener, *net.UDPConn, error) {
	listenTCP := func(addr string) (*net.TCPListener, error) { return fdstore.ListenTCP(keepAs+"-tcp", addr) }
	listenUDP := func(addr string) (*net.UDPConn, error) { return fdstore.ListenUDP(keepAs+"-udp", addr) }
	if keepAs == "" {
		listenTCP = func(addr string) (*net.TCPListener, error) {
			a, err := net.ResolveTCPAddr("tcp", addr)
			if err != nil {
				return nil, err
			}
			return net.ListenTCP("tcp", a)
		}
		listenUDP = func(addr string) (*net.UDPConn, error) {
			a, err := net.ResolveUDPAddr("udp", addr)
			if err != nil {
				return nil, err
			}
			return net.ListenUDP("udp", a)
		}
	}
	tl, err := listenTCP(bind)
	if err != nil {
		return nil, nil, fmt.Errorf("gossip listen tcp %s: %w", bind, err)
	}
	host, _, _ := net.SplitHostPort(bind)
	port := tl.Addr().(*net.TCPAddr).Port
	ul, err := listenUDP(net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		tl.Close()
		return nil, nil, fmt.Errorf("gossip listen udp %s: %w", bind, err)
	}
	return tl, ul, nil
}

func newKeptTransport(tcp *net.TCPListener, udp *net.UDPConn, log hclog.Logger) *keptTransport {
	for size := udpRecvBuf; size > 0; size /= 2 {
		if udp.SetReadBuffer(size) == nil {
			break
		}
	}
	t := &keptTransport{tcp: tcp, udp: udp, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn), log: log}
	t.wg.Add(2)
	go t.acceptLoop()
	go t.readLoop()
	return t
}

// port is the bound port (TCP and UDP share it).
func (t *keptTransport) port() int { return t.tcp.Addr().(*net.TCPAddr).Port }

// FinalAdvertiseAddr is the address given, else the bound one; bound to
// any address, a private address of this host (memberlist's own choice).
func (t *keptTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip != "" {
		a := net.ParseIP(ip)
		if a == nil {
			return nil, 0, fmt.Errorf("gossip advertise address %q is not an IP address", ip)
		}
		if a4 := a.To4(); a4 != nil {
			a = a4
		}
		return a, port, nil
	}
	bound := t.tcp.Addr().(*net.TCPAddr).IP
	if !bound.IsUnspecified() {
		return bound, t.port(), nil
	}
	priv, err := sockaddr.GetPrivateIP()
	if err != nil {
		return nil, 0, fmt.Errorf("gossip: find a private address to advertise: %w", err)
	}
	if priv == "" {
		return nil, 0, fmt.Errorf("gossip: bound to any address and no private address to advertise; set one")
	}
	return net.ParseIP(priv), t.port(), nil
}

// WriteTo sends one packet.
func (t *keptTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = t.udp.WriteTo(b, ua)
	return time.Now(), err
}

func (t *keptTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *keptTransport) StreamCh() <-chan net.Conn { return t.streams }

// DialTimeout opens a stream to a peer.
func (t *keptTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", addr)
}

// Shutdown closes this process's sockets and waits for its loops. Kept
// sockets stay in the fd store: the next process takes them.
func (t *keptTransport) Shutdown() error {
	t.shutdown.Store(true)
	t.tcp.Close()
	t.udp.Close()
	t.wg.Wait()
	return nil
}

// acceptLoop hands each incoming stream to memberlist, backing off on
// accept errors (a full fd table) as memberlist's transport does.
func (t *keptTransport) acceptLoop() {
	defer t.wg.Done()
	var delay time.Duration
	for {
		c, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.shutdown.Load() {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.log.Error("accept gossip stream", "error", err)
			time.Sleep(delay)
			continue
		}
		delay = 0
		t.streams <- c
	}
}

// readLoop hands each incoming packet to memberlist.
func (t *keptTransport) readLoop() {
	defer t.wg.Done()
	for {
		buf := make([]byte, 65536)
		n, from, err := t.udp.ReadFrom(buf)
		at := time.Now()
		if err != nil {
			if t.shutdown.Load() {
				return
			}
			t.log.Error("read gossip packet", "error", err)
			continue
		}
		if n < 1 {
			continue
		}
		t.packets <- &memberlist.Packet{Buf: buf[:n], From: from, Timestamp: at}
	}
}
