//go:build !linux

package localsock

import (
	"fmt"
	"net"
	"runtime"
)

// LoopbackOwner is not available here; a caller that needs it refuses.
func LoopbackOwner(c net.Conn) (uint32, error) {
	return 0, fmt.Errorf("owner of %s: not supported on %s", c.RemoteAddr(), runtime.GOOS)
}
