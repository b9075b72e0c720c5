package serving

import (
	"context"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// trustedEvents are the changes to the list's directory that can change
// the list: ployzd writes it by rename, and an operator may edit or
// remove it.
const trustedEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
	unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// follow checks the file at every inotify event on its directory until
// ctx ends (true). It returns false, for the caller to poll, when inotify
// is unavailable, the directory does not exist or goes away, or events
// were lost.
func (f *trustedFollower) follow(ctx context.Context, wake func()) bool {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return false
	}
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(f.path), trustedEvents); err != nil {
		unix.Close(fd)
		return false
	}
	// Non-blocking, so reads park the goroutine on the runtime's poller
	// and Close wakes them.
	file := os.NewFile(uintptr(fd), "inotify")
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		file.Close()
	}()
	f.check(wake) // a change between followTrusted and the watch
	buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := file.Read(buf)
		if err != nil {
			return ctx.Err() != nil
		}
		f.check(wake)
		if lost(buf[:n]) {
			return false
		}
	}
}

// lost reports whether the events end the watch (its directory was
// removed or moved) or some were dropped (queue overflow).
func lost(b []byte) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		if ev.Mask&(unix.IN_IGNORED|unix.IN_Q_OVERFLOW|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
			return true
		}
		b = b[min(len(b), unix.SizeofInotifyEvent+int(ev.Len)):]
	}
	return false
}
