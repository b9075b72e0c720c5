package fsutil

import (
	"context"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// followEvents are the changes to a directory that can change one of its
// files: a write by rename (WriteFileAtomic), an edit in place, a chmod,
// a removal.
const followEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
	unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// FollowFile calls changed once the watch is set up (a change may have
// come before it) and then after every inotify event on path's directory
// that names path, until ctx ends (true). Events on the directory's other
// files do not call it. It returns false, for the caller to poll, when
// inotify is unavailable, the directory does not exist or goes away, or
// events were lost; changed has then been called once more, since a
// change may be among the lost.
func FollowFile(ctx context.Context, path string, changed func()) bool {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return false
	}
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), followEvents); err != nil {
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
	changed()
	name := filepath.Base(path)
	buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := file.Read(buf)
		if err != nil {
			return ctx.Err() != nil
		}
		ours, lost := scanEvents(buf[:n], name)
		if ours || lost {
			changed()
		}
		if lost {
			return false
		}
	}
}

// scanEvents reports whether the events name the file, and whether they
// end the watch (its directory was removed or moved) or some were
// dropped (queue overflow).
func scanEvents(b []byte, name string) (ours, lost bool) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		if ev.Mask&(unix.IN_IGNORED|unix.IN_Q_OVERFLOW|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
			lost = true
		}
		end := min(len(b), unix.SizeofInotifyEvent+int(ev.Len))
		if ev.Len > 0 && eventName(b[unix.SizeofInotifyEvent:end]) == name {
			ours = true
		}
		b = b[end:]
	}
	return ours, lost
}

// eventName is an event's name without the NUL padding the kernel adds.
func eventName(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
