package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/ployz/ployz/sdk/fdstore"
)

// Names of the port-53 sockets in systemd's fd store.
const (
	FDNameUDP = "ployz-dns-udp"
	FDNameTCP = "ployz-dns-tcp"
)

// Sockets are the UDP and TCP sockets queries arrive on.
type Sockets struct {
	UDP net.PacketConn
	TCP net.Listener
}

// TakeSockets returns sockets for listen: first those systemd passed in
// LISTEN_FDS (from its fd store), else freshly bound ones, which it parks
// in the fd store so the next process takes them over and queries queue in
// the kernel across restarts. Stored sockets bound elsewhere are dropped.
func TakeSockets(listen netip.AddrPort, log hclog.Logger) (*Sockets, error) {
	s := &Sockets{}
	if f := fdstore.Take(FDNameUDP); f != nil {
		if pc, err := net.FilePacketConn(f); err == nil && sameAddr(pc.LocalAddr(), listen) {
			s.UDP = pc
			hold(FDNameUDP, pc.(syscall.Conn), log)
			log.Info("took UDP socket from the fd store", "addr", pc.LocalAddr())
		} else if err == nil {
			pc.Close()
		}
		f.Close()
	}
	if f := fdstore.Take(FDNameTCP); f != nil {
		if l, err := net.FileListener(f); err == nil && sameAddr(l.Addr(), listen) {
			s.TCP = l
			hold(FDNameTCP, l.(syscall.Conn), log)
			log.Info("took TCP socket from the fd store", "addr", l.Addr())
		} else if err == nil {
			l.Close()
		}
		f.Close()
	}
	fdstore.CloseUntaken()
	lc := net.ListenConfig{Control: freebind}
	var park []syscall.Conn
	var parkNames []string
	if s.UDP == nil {
		forget(FDNameUDP)
		pc, err := lc.ListenPacket(context.Background(), "udp4", listen.String())
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("listen udp %s: %w", listen, err)
		}
		s.UDP = pc
		park, parkNames = append(park, pc.(syscall.Conn)), append(parkNames, FDNameUDP)
	}
	if s.TCP == nil {
		forget(FDNameTCP)
		l, err := lc.Listen(context.Background(), "tcp4", listen.String())
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("listen tcp %s: %w", listen, err)
		}
		s.TCP = l
		park, parkNames = append(park, l.(syscall.Conn)), append(parkNames, FDNameTCP)
	}
	for i, c := range park {
		if err := fdstore.Park(parkNames[i], c); err != nil {
			log.Warn("could not park socket in the fd store; restarts will refuse queries briefly", "name", parkNames[i], "error", err)
		}
	}
	return s, nil
}

// Close closes this process's copies of the sockets (systemd keeps its own).
func (s *Sockets) Close() {
	if s.UDP != nil {
		s.UDP.Close()
	}
	if s.TCP != nil {
		s.TCP.Close()
	}
}

// Release removes the sockets from systemd's fd store, handing port 53
// back once this process exits.
func Release() {
	forget(FDNameUDP)
	forget(FDNameTCP)
}

func forget(name string) { fdstore.Forget(name) }

// hold keeps a socket systemd passed back for a handoff (parked ones are
// held by fdstore.Park).
func hold(name string, c syscall.Conn, log hclog.Logger) {
	if err := fdstore.Hold(name, c); err != nil {
		log.Warn("could not keep the socket for a handoff", "name", name, "error", err)
	}
}

func sameAddr(a net.Addr, want netip.AddrPort) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap() == want.Addr() && ap.Port() == want.Port()
}

// freebind lets the socket bind the gateway address before the Docker
// bridge that carries it exists (e.g. at boot).
func freebind(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
	})
	return errors.Join(err, serr)
}
