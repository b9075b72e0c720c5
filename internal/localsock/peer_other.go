//go:build !linux

package localsock

import (
	"fmt"
	"net"
	"runtime"
)

// PeerUID is not available here: the store's sockets are Linux-only, and a
// connection whose peer cannot be checked is refused.
func PeerUID(net.Conn) (uint32, error) {
	return 0, fmt.Errorf("peer credentials are not supported on %s", runtime.GOOS)
}
