package containers

// Socket activation (compose x-socket-activation), after systemd's.
//
// The Machine, not Docker, listens on a socket-activated host port: the
// daemon binds it in the host's network namespace and keeps it in its
// unit's fd store (sdk/fdstore), so neither a replacement of the Service's
// Containers nor a restart of ployzd frees it, and clients connecting in
// between wait in the accept queue. Docker does not publish the port.
//
// Docker cannot pass a file descriptor into a Container, so each such
// Container starts with the launcher (core/launcher) as its entrypoint,
// bind-mounted read-only, and gets a unix stream socket of its own in a
// fresh directory <activateDir>/<random>/activate.sock, bind-mounted at
// launcher.SocketDir, as readiness sockets are. The launcher connects,
// receives the listening socket over SCM_RIGHTS, makes it fd 3 and execs
// the image's own command with LISTEN_FDS=1. A socket of one Container
// answers only a peer placed inside that Container (its cgroup, read from
// the kernel's peer credentials, as notify_sender.go places readiness
// senders): anything else gets "ERR why" and is counted.
//
// Old and new Containers of a replacement accept from the same queue; a
// stopped one stops accepting when its process exits. The listener is
// released once no Container on this Machine has used the port for
// listenerGrace, so a stop-first replacement (remove, then create) keeps it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/ployz/ployz/core/launcher"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/fdstore"
)

// labelSocketActivation marks a socket-activated Container with its host
// port, so a restarted daemon finds its socket directory again.
const labelSocketActivation = "ployz.socket_activation"

// listenerGrace is how long an activated port stays held after its last
// Container is removed: long enough for a stop-first replacement.
const listenerGrace = time.Minute

// activation holds this Machine's activated host ports and the
// per-Container activation sockets.
type activation struct {
	log hclog.Logger
	dir string // root-only host directory of the per-Container socket directories
	// launcher returns the host path of the launcher binary to mount.
	launcher func() (string, error)
	running  func(ctx context.Context, id string) (runInfo, bool)
	// placeWait bounds the wait for Docker to report the Container's main
	// process (the launcher may connect before Docker recorded its pid).
	placeWait time.Duration

	mu        sync.Mutex
	listeners map[int]*net.TCPListener // by host port
	lastUse   map[int]time.Time        // by host port: when its last socket closed
	socks     map[string]*activateSock // by Container ID
	// refused counts peers refused the socket (not inside the Container).
	refused atomic.Uint64
}

// activateSock is one Container's activation socket.
type activateSock struct {
	containerSock
	port int
	l    *net.UnixListener
}

func newActivation(log hclog.Logger, dir string, launcherPath func() (string, error), running func(context.Context, string) (runInfo, bool)) *activation {
	return &activation{log: log, dir: dir, launcher: launcherPath, running: running, placeWait: 10 * time.Second,
		listeners: map[int]*net.TCPListener{}, lastUse: map[int]time.Time{}, socks: map[string]*activateSock{}}
}

// fdName is an activated port's name in ployzd's fd store.
func fdName(port int) string { return "sockact-tcp-" + strconv.Itoa(port) }

// listener returns the held listener of port, binding (or taking back
// from the fd store) it on first use.
func (a *activation) listener(port int) (*net.TCPListener, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.listeners[port]; l != nil {
		return l, nil
	}
	l, err := fdstore.ListenTCP(fdName(port), ":"+strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	a.listeners[port] = l
	a.log.Info("socket activation: listening", "port", port)
	return l, nil
}

// open holds port's listener and binds an activation socket for a
// Container about to be created.
func (a *activation) open(port int) (*activateSock, error) {
	if _, err := a.listener(port); err != nil {
		return nil, err
	}
	return inFreshDir(a.dir, func(dir string) (*activateSock, error) { return a.bind(dir, port) })
}

// bind listens in dir (under the root-only activation dir) and serves.
func (a *activation) bind(dir string, port int) (*activateSock, error) {
	path, err := socketPath(a.dir, dir, launcher.SocketName, "activation socket")
	if err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("activation socket %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)                     // the directory goes with the Container
	if err := os.Chmod(path, 0o666); err != nil { // any user inside the Container
		l.Close()
		return nil, fmt.Errorf("activation socket: %w", err)
	}
	s := &activateSock{containerSock: containerSock{dir: dir, sock: l}, port: port, l: l}
	go a.serve(s)
	return s, nil
}

// attach makes s the socket of Container id.
func (a *activation) attach(s *activateSock, id string) {
	s.setOwner(id)
	a.mu.Lock()
	old := a.socks[id]
	a.socks[id] = s
	a.mu.Unlock()
	if old != nil && old != s {
		old.l.Close()
	}
}

// forget closes Container id's socket; its port is released after
// listenerGrace if no other Container uses it by then.
func (a *activation) forget(id string) {
	a.mu.Lock()
	s := a.socks[id]
	delete(a.socks, id)
	if s != nil {
		a.lastUse[s.port] = time.Now()
	}
	a.mu.Unlock()
	if s == nil {
		return
	}
	s.close()
	time.AfterFunc(listenerGrace, func() { a.release(listenerGrace) })
}

// release closes the listeners no Container has used for grace, and takes
// them out of the fd store: the port is free again.
func (a *activation) release(grace time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	used := map[int]bool{}
	for _, s := range a.socks {
		used[s.port] = true
	}
	for port, l := range a.listeners {
		if used[port] || time.Since(a.lastUse[port]) < grace {
			continue
		}
		l.Close()
		fdstore.Forget(fdName(port))
		delete(a.listeners, port)
		delete(a.lastUse, port)
		a.log.Info("socket activation: port released", "port", port)
	}
}

func (a *activation) serve(s *activateSock) {
	for {
		c, err := s.l.AcceptUnix()
		if err != nil {
			return
		}
		go a.handle(s, c)
	}
}

// handle answers one launcher: the listening socket when the peer is
// inside the socket's Container, else "ERR why".
func (a *activation) handle(s *activateSock, c *net.UnixConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(a.placeWait + 5*time.Second)) // a hung peer only holds this goroutine
	id := s.owner()
	pid, err := a.check(s, c, id)
	if err != nil {
		total := a.refused.Add(1)
		a.log.Warn("socket activation: refused", "container", short(id), "pid", pid, "reason", err, "refused_total", total)
		c.Write([]byte(launcher.ReplyErr + err.Error())) // the peer may be gone
		return
	}
	l, err := a.listener(s.port)
	if err == nil {
		err = sendListener(c, l, "tcp-"+strconv.Itoa(s.port))
	}
	if err != nil {
		a.log.Warn("socket activation: pass the socket", "container", short(id), "port", s.port, "error", err)
		c.Write([]byte(launcher.ReplyErr + err.Error())) // the peer may be gone
		return
	}
	a.log.Info("socket activation: socket passed", "container", short(id), "pid", pid, "port", s.port)
}

// check places the peer of c inside Container id, returning its pid.
func (a *activation) check(s *activateSock, c *net.UnixConn, id string) (int, error) {
	ctl, err := peerControl(c)
	defer ctl.close()
	if err != nil {
		return 0, err
	}
	if id == "" {
		return int(ctl.pid), errors.New("the socket's Container is not created yet")
	}
	snd, err := ctl.identify()
	if err != nil {
		return int(ctl.pid), err
	}
	run, err := a.mainProcess(id)
	if err != nil {
		return snd.pid, err
	}
	a.mu.Lock()
	serving := a.socks[id] == s
	a.mu.Unlock()
	if !serving {
		return snd.pid, errors.New("the socket no longer serves its Container")
	}
	return snd.pid, placed(snd, id, run.Pid)
}

// mainProcess waits for Docker to report Container id running with a
// main process: the launcher may connect before Docker recorded it.
func (a *activation) mainProcess(id string) (runInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), a.placeWait)
	defer cancel()
	for {
		if run, ok := a.running(ctx, id); ok && run.Pid > 0 {
			return run, nil
		}
		select {
		case <-ctx.Done():
			return runInfo{}, errors.New("the Container is not running")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// peerControl reads the peer's credentials (pid, and a pidfd where the
// kernel has SO_PEERPIDFD, Linux 6.6+) as the readiness sockets get them.
func peerControl(c *net.UnixConn) (notifyControl, error) {
	ctl := notifyControl{pidfd: -1}
	raw, err := c.SyscallConn()
	if err != nil {
		return ctl, err
	}
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			cerr = fmt.Errorf("%w: %v", errSenderUnknown, err)
			return
		}
		ctl.pid = cred.Pid
		if p, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			ctl.pidfd = p
		}
	})
	if err == nil {
		err = cerr
	}
	return ctl, err
}

// sendListener passes l's socket itself over c (never os.File.Fd, which
// would switch the daemon's copy to blocking mode).
func sendListener(c *net.UnixConn, l *net.TCPListener, name string) error {
	rc, err := l.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		_, _, serr = c.WriteMsgUnix([]byte(launcher.ReplyOK+name), unix.UnixRights(int(fd)), nil)
	}); err != nil {
		return err
	}
	return serr
}

// restore re-binds the sockets of existing activated Containers (dirs
// maps a Container ID to its socket directory, ports to its host port),
// takes their ports back from the fd store, and removes directories no
// Container uses.
func (a *activation) restore(dirs map[string]string, ports map[string]int) {
	for id, dir := range dirs {
		if filepath.Dir(dir) != filepath.Clean(a.dir) {
			a.log.Warn("socket activation: socket directory outside the activation dir; not served", "container", short(id), "dir", dir)
			continue
		}
		if _, err := a.listener(ports[id]); err != nil {
			a.log.Warn("socket activation: take back the port", "container", short(id), "port", ports[id], "error", err)
		}
		s, err := a.bind(dir, ports[id])
		if err != nil {
			a.log.Warn("socket activation: rebind", "container", short(id), "error", err)
			continue
		}
		a.attach(s, id)
	}
	used := map[string]bool{}
	for _, d := range dirs {
		used[filepath.Base(d)] = true
	}
	entries, _ := os.ReadDir(a.dir)
	for _, e := range entries {
		if e.IsDir() && !used[e.Name()] && len(e.Name()) == 16 {
			os.RemoveAll(filepath.Join(a.dir, e.Name())) // best effort
		}
	}
}

// activatedPort is the index and host port of the spec's socket-activated
// port; -1 when none.
func activatedPort(s rpc.ContainerSpec) (int, int) {
	for i, p := range s.Ports {
		if p.SocketActivation {
			return i, p.HostPort
		}
	}
	return -1, 0
}

// discard closes a socket whose Container was never created.
func (a *activation) discard(s *activateSock) {
	a.mu.Lock()
	a.lastUse[s.port] = time.Now()
	a.mu.Unlock()
	s.close()
	time.AfterFunc(listenerGrace, func() { a.release(listenerGrace) })
}

// prune forgets every Container not in exist.
func (a *activation) prune(exist map[string]bool) {
	a.mu.Lock()
	var gone []string
	for id := range a.socks {
		if !exist[id] {
			gone = append(gone, id)
		}
	}
	a.mu.Unlock()
	for _, id := range gone {
		a.forget(id)
	}
}
