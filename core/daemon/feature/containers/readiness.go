package containers

// Readiness notification (readiness "notify"), after sd_notify(3).
//
// Each notify Container gets its own unix datagram socket, created by the
// daemon before the Container exists, in a fresh directory
// <notifyDir>/<random>/notify.sock that is bind-mounted into the Container
// at /run/ployz-notify; NOTIFY_SOCKET points there. notifyDir is root-only
// (0700), so on the host only root reaches a socket; inside the Container
// any user may. A datagram on a socket can only be about that socket's
// Container, and the socket is closed and its directory removed with the
// Container, so an older or removed Container can never mark anything
// ready.
//
// READY=1 counts only from a sender placed inside that Container
// (notify_sender.go): the kernel's credentials name the sender, and its
// cgroup must be the Container's. A sender that cannot be placed (no
// credentials, exited before the daemon read them) is refused and counted,
// so a short-lived sender must wait for the daemon: BARRIER=1 with an fd
// (sd_notify_barrier(3), what systemd-notify does) is released once every
// earlier datagram has been handled.
//
// A Container is ready for one run: the first accepted READY=1 while the
// Container is running records that run's StartedAt. Repeats in the same
// run are ignored. Ready holds only while the Container is running with
// that same StartedAt, so an exit or a Docker restart withdraws readiness,
// and the restarted process must notify again.
//
// Restart of the daemon: the verdicts are written atomically to
// <DataDir>/readiness.json on every change. On start the daemon re-binds a
// fresh socket in every notify Container's directory (found from its bind
// mount) and keeps a saved verdict only when the Container still runs with
// the recorded StartedAt. A notification sent while no daemon was running
// is lost: that run stays not ready until the Container restarts and
// notifies again.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
)

// Where the notify socket appears inside a Container.
const (
	notifyMountTarget = "/run/ployz-notify"
	notifySocketName  = "notify.sock"
)

// readiness holds the notify sockets and the notify verdicts of this
// Machine's Containers. Verdicts for healthcheck and none come from Docker.
type readiness struct {
	log       hclog.Logger
	dir       string // host directory of the per-Container socket directories
	statePath string
	// running describes a Container's current run when it is running.
	running func(ctx context.Context, id string) (runInfo, bool)
	changed chan struct{}

	mu    sync.Mutex
	socks map[string]*notifySock // by Container ID
	ready map[string]string      // Container ID -> StartedAt of the ready run
	// refused counts READY=1 datagrams refused because their sender was
	// not placed inside the Container (or could not be placed at all).
	refused atomic.Uint64
}

// notifySock is one Container's socket.
type notifySock struct {
	containerSock
	conn *net.UnixConn
}

// runInfo identifies one run of a Container.
type runInfo struct {
	StartedAt string
	Pid       int // main process, in Docker's pid namespace
}

func newReadiness(log hclog.Logger, dir, statePath string, running func(context.Context, string) (runInfo, bool)) *readiness {
	return &readiness{log: log, dir: dir, statePath: statePath, running: running, changed: make(chan struct{}, 1),
		socks: map[string]*notifySock{}, ready: map[string]string{}}
}

// open binds a socket in a fresh directory for a Container about to be
// created and starts reading it.
func (r *readiness) open() (*notifySock, error) { return inFreshDir(r.dir, r.bind) }

func (r *readiness) bind(dir string) (*notifySock, error) {
	n, err := r.listen(dir)
	if err != nil {
		return nil, err
	}
	go r.read(n)
	return n, nil
}

// listen binds the socket in dir, under the root-only notify dir.
func (r *readiness) listen(dir string) (*notifySock, error) {
	path, err := socketPath(r.dir, dir, notifySocketName, "notify socket")
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("notify socket %s: %w", path, err)
	}
	// Any user inside the Container may notify.
	if err := os.Chmod(path, 0o666); err != nil {
		conn.Close()
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	if err := passCredentials(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("notify socket %s: %w", path, err)
	}
	return &notifySock{containerSock: containerSock{dir: dir, sock: conn}, conn: conn}, nil
}

// rootOnlyDir makes dir a 0700 directory, tightening one an older daemon
// left searchable by everyone.
func rootOnlyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("notify dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("notify dir: %w", err)
	}
	return nil
}

// passCredentials asks the kernel to attach each sender's credentials
// (required: without them no sender can be placed) and, where the kernel
// has it (Linux 6.5+), a pidfd that pins the sender against pid reuse.
func passCredentials(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1); serr != nil {
			serr = fmt.Errorf("SO_PASSCRED: %w", serr)
			return
		}
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSPIDFD, 1) // older kernels: pid only
	})
	if err != nil {
		return err
	}
	return serr
}

// attach makes n the socket of Container id.
func (r *readiness) attach(n *notifySock, id string) {
	n.setOwner(id)
	r.mu.Lock()
	old := r.socks[id]
	r.socks[id] = n
	r.mu.Unlock()
	if old != nil && old != n {
		old.conn.Close()
	}
}

func (r *readiness) read(n *notifySock) {
	buf := make([]byte, 4096)
	oob := make([]byte, notifyOOB)
	for r.receive(n, buf, oob) {
	}
}

// receive handles one datagram on n; false once n is closed with its
// Container. The sender is placed before anything else, while it is most
// likely still there, and the fds it passed are closed last, which
// releases a BARRIER=1 sent after it.
func (r *readiness) receive(n *notifySock, buf, oob []byte) bool {
	nb, no, _, _, err := n.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return false
	}
	ctl := parseControl(oob[:no])
	defer ctl.close()
	if !hasReady(buf[:nb]) {
		return true
	}
	snd, err := ctl.identify()
	id := n.owner()
	switch {
	case id == "":
		r.log.Warn("notify: READY=1 before its Container exists; ignored", "dir", n.dir)
	case err != nil:
		r.refuse(id, int(ctl.pid), err)
	default:
		r.notified(n, id, snd)
	}
	return true
}

// refuse counts and logs a READY=1 that does not count.
func (r *readiness) refuse(id string, pid int, why error) {
	total := r.refused.Add(1)
	r.log.Warn("notify: READY=1 refused", "container", short(id), "pid", pid, "reason", why, "refused_total", total)
}

// hasReady reports whether a datagram holds a line READY=1.
func hasReady(b []byte) bool {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "READY=1" {
			return true
		}
	}
	return false
}

// notified records READY=1 from Container id's own socket n, sent by
// snd: the first one of a running run from a sender inside the Container
// counts, anything else is ignored or refused.
func (r *readiness) notified(n *notifySock, id string, snd sender) {
	r.mu.Lock()
	serving := r.socks[id] == n
	r.mu.Unlock()
	if !serving {
		r.log.Warn("notify: READY=1 on a socket no longer serving its Container; ignored", "container", short(id), "pid", snd.pid)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	run, ok := r.running(ctx, id)
	if !ok {
		r.log.Info("notify: READY=1 from a Container that is not running; ignored", "container", short(id), "pid", snd.pid)
		return
	}
	if err := placed(snd, id, run.Pid); err != nil {
		r.refuse(id, snd.pid, err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.socks[id] != n:
		r.log.Warn("notify: READY=1 on a socket no longer serving its Container; ignored", "container", short(id), "pid", snd.pid)
		return
	case r.ready[id] == run.StartedAt:
		r.log.Debug("notify: repeated READY=1 ignored", "container", short(id), "pid", snd.pid)
		return
	}
	r.ready[id] = run.StartedAt
	r.log.Info("notify: Container ready", "container", short(id), "pid", snd.pid)
	r.saveLocked()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// placed reports why snd is not inside Container id, whose main process
// is mainPid (in the daemon's pid namespace).
func placed(snd sender, id string, mainPid int) error {
	if mainPid <= 0 {
		return errors.New("the Container's main process is unknown")
	}
	main, err := readCgroups(mainPid)
	if err != nil {
		return fmt.Errorf("the Container's main process: %w", err)
	}
	return snd.inside(id, main)
}

// isReady reports whether Container id notified during the run that
// started at startedAt.
func (r *readiness) isReady(id, startedAt string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.ready[id]
	return ok && s == startedAt
}

// forget closes Container id's socket and drops its verdict.
func (r *readiness) forget(id string) {
	r.mu.Lock()
	n := r.socks[id]
	delete(r.socks, id)
	_, had := r.ready[id]
	delete(r.ready, id)
	if had {
		r.saveLocked()
	}
	r.mu.Unlock()
	if n != nil {
		n.close()
	}
}

// prune forgets every Container not in exist.
func (r *readiness) prune(exist map[string]bool) {
	r.mu.Lock()
	var gone []string
	for id := range r.socks {
		if !exist[id] {
			gone = append(gone, id)
		}
	}
	for id := range r.ready {
		if !exist[id] {
			gone = append(gone, id)
		}
	}
	r.mu.Unlock()
	for _, id := range gone {
		r.forget(id)
	}
}

type readinessState struct {
	// Ready maps a Container ID to the StartedAt of its ready run.
	Ready map[string]string `json:"ready"`
}

func (r *readiness) saveLocked() {
	if r.statePath == "" {
		return
	}
	b, _ := json.Marshal(readinessState{Ready: r.ready})
	if err := machine.WriteFileAtomic(r.statePath, b, 0o600); err != nil {
		r.log.Warn("notify: save readiness state", "error", err)
	}
}

// restore re-binds the sockets of existing notify Containers (dirs maps a
// Container ID to its socket directory; started to its StartedAt when
// running) and keeps saved verdicts still valid. Directories under the
// notify dir that no Container uses are removed.
func (r *readiness) restore(dirs, started map[string]string) {
	var saved readinessState
	if b, err := os.ReadFile(r.statePath); err == nil {
		if err := json.Unmarshal(b, &saved); err != nil {
			r.log.Warn("notify: readiness state unreadable; starting empty", "error", err)
		}
	}
	for id, dir := range dirs {
		if filepath.Dir(dir) != filepath.Clean(r.dir) {
			r.log.Warn("notify: socket directory outside the notify dir; not served", "container", short(id), "dir", dir)
			continue
		}
		n, err := r.bind(dir)
		if err != nil {
			r.log.Warn("notify: rebind", "container", short(id), "error", err)
			continue
		}
		r.attach(n, id)
	}
	r.mu.Lock()
	for id, s := range saved.Ready {
		if st, ok := started[id]; ok && st == s {
			r.ready[id] = s
		}
	}
	r.saveLocked()
	r.mu.Unlock()
	used := map[string]bool{}
	for _, d := range dirs {
		used[filepath.Base(d)] = true
	}
	entries, _ := os.ReadDir(r.dir)
	for _, e := range entries {
		if e.IsDir() && !used[e.Name()] && len(e.Name()) == 16 {
			os.RemoveAll(filepath.Join(r.dir, e.Name())) // best effort
		}
	}
}

// verdict is the Ready verdict for an inspected Container: running and
// past its readiness gate.
func (r *readiness) verdict(c container.InspectResponse) bool {
	st := c.State
	if st == nil || !st.Running || st.Restarting || st.Paused {
		return false
	}
	mode := ""
	if c.Config != nil {
		mode = c.Config.Labels[rpc.LabelReadiness]
	}
	switch mode {
	case readinessNotify:
		return r.isReady(c.ID, st.StartedAt)
	case readinessNone:
		return true
	default:
		return st.Health == nil || st.Health.Status == container.Healthy
	}
}

// short is a Docker ID as logs show it.
func short(id string) string { return feature.Short(id) }
