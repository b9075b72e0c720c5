package sdk

import (
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// waitExit waits on a pidfd for process pid to exit, detached to close or
// ctx to end. waited is false when the kernel gives no pollable pidfd
// (before Linux 5.3, or a sandbox refusing pidfd_open): the caller polls
// instead.
func waitExit(ctx context.Context, pid int, detached <-chan struct{}) (waited bool, err error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true, nil // already gone
	}
	if err != nil {
		return false, nil
	}
	// Non-blocking, so os.NewFile hands it to the runtime's poller: the
	// wait below parks the goroutine instead of a thread.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return false, nil
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return false, nil
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-detached:
		case <-done:
		}
		f.Close() // wakes the wait below
	}()
	// A pidfd turns readable when its process exits. The first call
	// asks the poller to wait; the second comes once it is readable.
	first := true
	werr := rc.Read(func(uintptr) bool {
		if first {
			first = false
			return false
		}
		return true
	})
	switch {
	case ctx.Err() != nil:
		return true, ctx.Err()
	case werr == nil || errors.Is(werr, os.ErrClosed):
		return true, nil // exited, or the host detached
	default:
		// The runtime cannot poll this fd: poll by signal instead.
		return false, nil
	}
}
