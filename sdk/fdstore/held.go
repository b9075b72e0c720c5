package fdstore

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ployz/ployz/sdk"
)

// The sockets this process serves under their fd store names, each a
// close-on-exec duplicate, so a handoff can pass them to a successor
// process (sdk.DataPlane.Sockets) however the process got them: parked
// now (Park) or passed back by systemd (Hold).
var held = struct {
	sync.Mutex
	fds map[string]int
}{fds: map[string]int{}}

// Hold records c's socket under name for a handoff, replacing an earlier
// one of that name. Like Park it never calls os.File.Fd.
func Hold(name string, c syscall.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	dup := -1
	var derr error
	if err := rc.Control(func(fd uintptr) { dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 3) }); err != nil {
		return err
	}
	if derr != nil {
		return fmt.Errorf("duplicate socket %s: %w", name, derr)
	}
	drop(name)
	held.Lock()
	held.fds[name] = dup
	held.Unlock()
	return nil
}

// Held lists the held sockets by name: a data plane's
// sdk.DataPlane.Sockets.
func Held() []sdk.HandoffSocket {
	held.Lock()
	defer held.Unlock()
	out := make([]sdk.HandoffSocket, 0, len(held.fds))
	for n, fd := range held.fds {
		out = append(out, sdk.HandoffSocket{Name: n, FD: fd})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func drop(name string) {
	held.Lock()
	defer held.Unlock()
	if fd, ok := held.fds[name]; ok {
		_ = unix.Close(fd)
		delete(held.fds, name)
	}
}

// heldCopy returns a close-on-exec duplicate of the socket held under
// name, or nil: what a process that closed its listener (ployzd leaving
// the Cluster parts, a plugin reloading its spec) listens on again.
func heldCopy(name string) *os.File {
	held.Lock()
	defer held.Unlock()
	fd, ok := held.fds[name]
	if !ok {
		return nil
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(dup), name)
}
