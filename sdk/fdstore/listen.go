package fdstore

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// ListenTCP listens on addr (host:port) with a socket that outlives this
// process: under systemd the one kept in the fd store under name (passed
// back at this start, or held since an earlier call in this process),
// else one bound now and parked there. The port is then never free across
// a restart of the unit, so no other local user can take it in between;
// connections that arrive meanwhile wait in the kernel's backlog. A kept
// socket bound to another address is dropped from the store first.
// Outside systemd, and for port 0, it is a plain listen.
//
// Closing the listener leaves the socket kept: Forget releases the port.
func ListenTCP(name, addr string) (*net.TCPListener, error) {
	want, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen tcp %s: %w", addr, err)
	}
	return keep(name, want.Port, func(f *os.File) (*net.TCPListener, bool) {
		l, err := net.FileListener(f)
		if err != nil {
			return nil, false
		}
		tl, ok := l.(*net.TCPListener)
		if !ok || !sameAddr(tl.Addr(), want.IP, want.Port) {
			l.Close()
			return nil, false
		}
		return tl, true
	}, func() (*net.TCPListener, error) { return net.ListenTCP("tcp", want) })
}

// ListenUDP is ListenTCP for a UDP socket on addr.
func ListenUDP(name, addr string) (*net.UDPConn, error) {
	want, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen udp %s: %w", addr, err)
	}
	return keep(name, want.Port, func(f *os.File) (*net.UDPConn, bool) {
		c, err := net.FilePacketConn(f)
		if err != nil {
			return nil, false
		}
		uc, ok := c.(*net.UDPConn)
		if !ok || !sameAddr(uc.LocalAddr(), want.IP, want.Port) {
			c.Close()
			return nil, false
		}
		return uc, true
	}, func() (*net.UDPConn, error) { return net.ListenUDP("udp", want) })
}

// keepable is a socket the fd store can hold.
type keepable interface {
	syscall.Conn
	Close() error
}

// keep returns the kept socket named name that adopt accepts, else binds
// one and parks it.
func keep[C keepable](name string, port int, adopt func(*os.File) (C, bool), bind func() (C, error)) (C, error) {
	var none C
	if !Available() || port == 0 {
		return bind()
	}
	f := heldCopy(name)
	if f == nil {
		f = Take(name)
	}
	if f != nil {
		c, ok := adopt(f) // adopt duplicates the descriptor
		f.Close()
		if ok {
			if err := Hold(name, c); err != nil {
				c.Close()
				return none, err
			}
			return c, nil
		}
		Forget(name) // kept for another address: the port goes back
	}
	c, err := bind()
	if err != nil {
		return none, err
	}
	if err := Park(name, c); err != nil {
		c.Close()
		return none, fmt.Errorf("keep %s in the fd store: %w", name, err)
	}
	return c, nil
}

// sameAddr reports whether a is ip:port. No ip, or an unspecified one,
// means any address: Go binds "0.0.0.0" of network "tcp" as "[::]".
func sameAddr(a net.Addr, ip net.IP, port int) bool {
	var got net.IP
	var gotPort int
	switch a := a.(type) {
	case *net.TCPAddr:
		got, gotPort = a.IP, a.Port
	case *net.UDPAddr:
		got, gotPort = a.IP, a.Port
	default:
		return false
	}
	if gotPort != port {
		return false
	}
	if ip == nil || ip.IsUnspecified() {
		return got.IsUnspecified()
	}
	return ip.Equal(got)
}
