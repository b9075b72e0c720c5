package containers

// Who sent a readiness notification. The per-Container socket sits in a
// root-only directory, so only a process that sees the bind mount (inside
// the Container) or root can reach it; the sender's credentials then have
// to place it inside the Container the socket serves. A sender that cannot
// be placed — no credentials, or gone before the daemon read its cgroup —
// is refused, never passed.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// notifyOOB holds credentials, a pidfd and the most fds one datagram can
// pass (SCM_MAX_FD), so that every fd a sender passes is received and
// closed rather than truncated.
var notifyOOB = unix.CmsgSpace(unix.SizeofUcred) + unix.CmsgSpace(4) + unix.CmsgSpace(4*253)

// Why a sender is refused.
var (
	errSenderUnknown = errors.New("sender has no credentials the daemon can read")
	errSenderGone    = errors.New("sender exited before the daemon could place it")
)

// notifyControl is what the kernel attached to one datagram.
type notifyControl struct {
	pid   int32 // SCM_CREDENTIALS, in the daemon's pid namespace; 0 when none
	pidfd int   // SCM_PIDFD (Linux 6.5+); -1 when none
	fds   []int // SCM_RIGHTS (BARRIER=1 passes one)
}

// parseControl reads a datagram's control messages. Every fd in them is
// the daemon's to close (close).
func parseControl(oob []byte) notifyControl {
	c := notifyControl{pidfd: -1}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return c
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Level != unix.SOL_SOCKET {
			continue
		}
		switch m.Header.Type {
		case unix.SCM_CREDENTIALS:
			if cred, err := unix.ParseUnixCredentials(m); err == nil {
				c.pid = cred.Pid
			}
		case unix.SCM_PIDFD:
			if len(m.Data) >= 4 {
				c.pidfd = int(int32(binary.NativeEndian.Uint32(m.Data)))
			}
		case unix.SCM_RIGHTS:
			if fds, err := unix.ParseUnixRights(m); err == nil {
				c.fds = append(c.fds, fds...)
			}
		}
	}
	return c
}

// close closes every fd the datagram brought. Closing the fd of a
// BARRIER=1 datagram tells its sender that every earlier datagram has been
// handled (sd_notify_barrier(3)).
func (c notifyControl) close() {
	if c.pidfd >= 0 {
		unix.Close(c.pidfd) // nothing to do about it
	}
	for _, fd := range c.fds {
		unix.Close(fd) // nothing to do about it
	}
}

// sender is a datagram's sender, placed the moment it was received.
type sender struct {
	pid     int
	cgroups cgroups
}

// identify places the sender: its pid and its cgroups, read while it is
// provably the same live process. With a pidfd the pid cannot have been
// reused: the pidfd names the sending process itself, and it still being
// alive after the read means the read was of that process.
func (c notifyControl) identify() (sender, error) {
	pid := int(c.pid)
	if c.pidfd >= 0 {
		p, err := pidfdPid(c.pidfd)
		if err != nil {
			return sender{}, fmt.Errorf("%w: %v", errSenderUnknown, err)
		}
		if p < 0 {
			return sender{}, errSenderGone
		}
		pid = p
	}
	if pid <= 0 {
		return sender{}, errSenderUnknown
	}
	cg, err := readCgroups(pid)
	if err != nil {
		return sender{}, fmt.Errorf("%w: %v", errSenderGone, err)
	}
	if c.pidfd >= 0 && unix.PidfdSendSignal(c.pidfd, 0, nil, 0) != nil {
		return sender{}, errSenderGone
	}
	return sender{pid: pid, cgroups: cg}, nil
}

// pidfdPid is the pid a pidfd names in the daemon's pid namespace: -1 once
// the process exited, 0 when it is outside the namespace.
func pidfdPid(fd int) (int, error) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Pid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("pidfd without a Pid line")
}

// cgroups maps a hierarchy ("0:" for v2, "N:controllers" for v1) to a
// process's cgroup path in it.
type cgroups map[string]string

func readCgroups(pid int) (cgroups, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil, err
	}
	cg := cgroups{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		i := strings.LastIndexByte(l, ':')
		if i < 0 {
			continue
		}
		cg[l[:i]] = l[i+1:]
	}
	return cg, nil
}

// inside reports why s is not inside Container id, whose main process is
// in main: in every hierarchy where the main process's cgroup names the
// Container, the sender's cgroup must be that cgroup or below it. A path
// that merely contains the id elsewhere (a user's own delegated cgroup
// named after it) does not count.
func (s sender) inside(id string, main cgroups) error {
	named := 0
	for h, p := range main {
		if !strings.Contains(p, id) {
			continue
		}
		named++
		sp := s.cgroups[h]
		if sp != p && !strings.HasPrefix(sp, p+"/") {
			return fmt.Errorf("sender's cgroup %q is not the Container's %q", sp, p)
		}
	}
	if named == 0 {
		return errors.New("the Container's main process has no cgroup naming the Container")
	}
	return nil
}
