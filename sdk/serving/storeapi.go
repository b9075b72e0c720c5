package serving

import (
	"fmt"
	"net"
	"strings"
)

// CheckStoreAPI validates a spec's store_api: an absolute unix socket path
// (or unix:// URL), or a host:port for a store reached over TCP.
func CheckStoreAPI(addr string) error {
	if p, ok := strings.CutPrefix(addr, "unix://"); ok {
		addr = p
		if !strings.HasPrefix(addr, "/") {
			return fmt.Errorf("%q is not an absolute socket path", "unix://"+addr)
		}
	}
	if strings.HasPrefix(addr, "/") {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%q is neither a socket path nor a host:port", addr)
	}
	return nil
}
