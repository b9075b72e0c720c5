package localsock

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// LoopbackOwner is the uid owning the server end of an established TCP
// connection to a loopback address, read from /proc/net/tcp{,6}: the row
// whose local address is c's remote one and whose remote address is c's
// local one. The kernel gives an accepted socket its listener's owner, so
// this is whoever bound the port.
func LoopbackOwner(c net.Conn) (uint32, error) {
	local, lok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("owner of %s: not a TCP connection", c.RemoteAddr())
	}
	server, client := remote.AddrPort(), local.AddrPort()
	if !server.Addr().Unmap().IsLoopback() {
		return 0, fmt.Errorf("owner of %s: not a loopback address", server)
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, ok, err := findOwner(f, procAddr(server), procAddr(client))
		if err != nil {
			return 0, err
		}
		if ok {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("owner of %s: no socket for this connection in /proc/net/tcp", server)
}

// procAddr formats ap as /proc/net/tcp{,6} does: the address's 32-bit
// words in host byte order, each as 8 hex digits, then the port. IPv4
// addresses are spelled both ways (a dual-stack listener's sockets show
// in tcp6 as ::ffff:a.b.c.d); the caller matches either.
func procAddr(ap netip.AddrPort) [2]string {
	a := ap.Addr().Unmap()
	port := fmt.Sprintf(":%04X", ap.Port())
	if a.Is6() {
		return [2]string{words(a.AsSlice()) + port, ""}
	}
	mapped := a.As16()
	return [2]string{words(a.AsSlice()) + port, words(mapped[:]) + port}
}

func words(b []byte) string {
	var sb strings.Builder
	for i := 0; i+4 <= len(b); i += 4 {
		fmt.Fprintf(&sb, "%08X", binary.NativeEndian.Uint32(b[i:i+4]))
	}
	return sb.String()
}

// findOwner scans one /proc/net file for the row (local, remote) and
// returns its uid column.
func findOwner(path string, local, remote [2]string) (uint32, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, false, nil // no IPv6 in this kernel
		}
		return 0, false, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 || !matches(fs[1], local) || !matches(fs[2], remote) {
			continue
		}
		uid, err := strconv.ParseUint(fs[7], 10, 32)
		if err != nil {
			return 0, false, fmt.Errorf("read %s: uid %q: %w", path, fs[7], err)
		}
		return uint32(uid), true, nil
	}
	return 0, false, sc.Err()
}

func matches(field string, want [2]string) bool {
	return field == want[0] || (want[1] != "" && field == want[1])
}
