package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Where the Machine mounts the launcher and the activation socket inside
// a socket-activated Container.
const (
	Path       = "/.ployz/launch"
	SocketDir  = "/run/ployz-activate"
	SocketName = "activate.sock"
	// Name is the launcher's own name: ployzd runs as the launcher when
	// started under it (the basename of Path).
	Name = "launch"
)

// ListenFD is the first passed descriptor (SD_LISTEN_FDS_START).
const ListenFD = 3

// Reply prefixes on the activation socket: "OK <fdname>" with the socket
// attached, or "ERR <why>".
const (
	ReplyOK  = "OK "
	ReplyErr = "ERR "
)

// wait bounds how long the launcher retries a socket nobody serves yet
// (the Machine's daemon restarting while Docker restarts the Container).
const wait = 60 * time.Second

// Main runs the launcher: os.Args[1:] is the command to exec. It returns
// only on failure, with the exit code.
func Main() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "ployz launch: usage: launch COMMAND [ARG...] (the Container's own entrypoint and command)")
		return 2
	}
	fd, name, err := Receive(SocketDir+"/"+SocketName, wait)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ployz launch: socket activation: %v\n", err)
		return 1
	}
	if err := Exec(fd, name, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "ployz launch: %v\n", err)
		return 127
	}
	return 0
}

// Receive asks the activation socket at path for the listening socket,
// retrying for up to wait while nothing serves it.
func Receive(path string, wait time.Duration) (int, string, error) {
	deadline := time.Now().Add(wait)
	for {
		fd, name, err := receiveOnce(path)
		var busy bool
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) {
			busy = true
		}
		if !busy || time.Now().After(deadline) {
			return fd, name, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func receiveOnce(path string) (int, string, error) {
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(s)
	if err := unix.Connect(s, &unix.SockaddrUnix{Name: path}); err != nil {
		return -1, "", fmt.Errorf("connect %s: %w", path, err)
	}
	buf := make([]byte, 1024)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := unix.Recvmsg(s, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, "", fmt.Errorf("receive from %s: %w", path, err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	msg := strings.TrimSpace(string(buf[:n]))
	name, ok := strings.CutPrefix(msg, ReplyOK)
	if !ok || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd) // refusing it
		}
		if why, refused := strings.CutPrefix(msg, ReplyErr); refused {
			return -1, "", fmt.Errorf("refused by the Machine: %s", why)
		}
		return -1, "", fmt.Errorf("unexpected answer %q with %d fds", msg, len(fds))
	}
	return fds[0], name, nil
}

// Exec makes fd the passed socket fd 3, sets the LISTEN_* variables and
// execs argv (looked up in PATH). The socket's file status flags are left
// as they are: O_NONBLOCK is shared by every process holding the socket,
// and switching a Go replica's listener to blocking mode would let its
// accept outlive its Close and take a connection it then drops.
func Exec(fd int, name string, argv []string) error {
	if fd != ListenFD {
		if err := unix.Dup3(fd, ListenFD, 0); err != nil {
			return fmt.Errorf("dup the socket to fd %d: %w", ListenFD, err)
		}
		unix.Close(fd) // fd 3 holds it
	} else if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		return fmt.Errorf("fd %d: %w", ListenFD, err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("command %q: %w", argv[0], err)
	}
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LISTEN_") {
			env = append(env, kv)
		}
	}
	env = append(env, "LISTEN_FDS=1", "LISTEN_PID="+strconv.Itoa(os.Getpid()), "LISTEN_FDNAMES="+name)
	if err := unix.Exec(path, argv, env); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}
