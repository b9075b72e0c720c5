package rpc

import (
	"net"

	"golang.org/x/sys/unix"
)

// tcpEstablished is TCP_ESTABLISHED of Linux's include/net/tcp_states.h.
const tcpEstablished = 1

// peerClosed reports whether the kernel already holds the peer's end of
// c: a FIN (CLOSE_WAIT) or RST (CLOSE) was received, or c is closed. It
// reads the socket's TCP state (TCP_INFO) without touching its data, so
// it can run while gRPC's reader owns the connection. Only a TCP
// connection is checked; any other is assumed alive.
func peerClosed(c net.Conn) bool {
	var tc *net.TCPConn
	switch v := c.(type) {
	case *net.TCPConn:
		tc = v
	case interface{ TCPConn() *net.TCPConn }: // a wrapped one (tests)
		tc = v.TCPConn()
	default:
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return true
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return true
	}
	return info.State != tcpEstablished
}
