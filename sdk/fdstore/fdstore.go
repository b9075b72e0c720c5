package fdstore

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Park sends c's socket to systemd's fd store under name. It passes the
// descriptor itself (never os.File.Fd, which would switch the shared
// socket to blocking mode and make reads ignore deadlines).
func Park(name string, c syscall.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = Notify("FDSTORE=1\nFDNAME="+name, int(fd)) }); err != nil {
		return err
	}
	if serr == nil {
		serr = Hold(name, c)
	}
	return serr
}

// Forget removes the sockets named name from the fd store, from what a
// handoff passes on and, when systemd passed one back and nothing took it,
// from this process: once no process holds it the port is free again.
func Forget(name string) {
	drop(name)
	closeInherited(name)
	_ = Notify("FDSTOREREMOVE=1\nFDNAME=" + name)
}

// Available reports whether a service manager listens for notifications.
func Available() bool { return os.Getenv("NOTIFY_SOCKET") != "" }

// Notify sends state (and fds) to $NOTIFY_SOCKET; without one it is a
// no-op, as outside systemd.
func Notify(state string, fds ...int) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("notify socket: %w", err)
	}
	defer unix.Close(fd)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	// x/sys/unix maps a leading '@' to the abstract namespace.
	if err := unix.Sendmsg(fd, []byte(state), oob, &unix.SockaddrUnix{Name: path}, 0); err != nil {
		return fmt.Errorf("notify %s: %w", path, err)
	}
	return nil
}
