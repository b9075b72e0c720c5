package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/internal/fsutil"
)

// HandoffSignal asks for a handoff: a data-plane plugin moves onto a new
// binary without a gap.
// SIGUSR2 (HandoffSignal) asks the serving process to start its
// successor: the same command line (the unit's ExecStart path, which an
// upgrade re-points at the new binary) with the listening sockets passed
// the way systemd passes its fd store (LISTEN_FDS, LISTEN_FDNAMES), and
// a pipe the successor writes to once its data plane answers
// (DataPlaneServing). Both processes serve the same sockets meanwhile;
// then the old one makes the successor the unit's main process
// (MAINPID=) and stops as on SIGTERM (stops accepting, answers in-flight
// requests, closes). A successor that exits or does not answer within
// HandoffTimeout is stopped and the old process keeps serving, so a
// broken binary never takes the data plane down. A host asks for a
// handoff only when the reattach record says the process supports it
// (Reattach.Handoff); older binaries are restarted by their unit.
const HandoffSignal = syscall.SIGUSR2

// HandoffTimeout bounds the wait for a successor's data plane to answer.
var HandoffTimeout = 45 * time.Second

// Environment of a successor process (besides LISTEN_FDS/LISTEN_FDNAMES).
const (
	envHandoffReady = "PLOYZ_HANDOFF_READY_FD" // the fd to write one byte to once serving
	envHandoffFrom  = "PLOYZ_HANDOFF_FROM"     // the pid of the process handing over
)

// HandoffSocket is one listening socket a data plane passes to its
// successor under the name it keeps in systemd's fd store.
type HandoffSocket struct {
	Name string
	FD   int
}

// successorState is what a process started by a handoff knows about it.
var successorState struct {
	once    sync.Once
	readyFD int // -1 when not a successor or already reported
	from    int
}

// takeHandoffEnv runs first in a successor: it makes LISTEN_FDS address
// this process (go-systemd checks LISTEN_PID) and keeps the ready pipe
// out of the environment of anything it starts.
func takeHandoffEnv() (from int, ok bool) {
	successorState.readyFD = -1
	v := os.Getenv(envHandoffReady)
	if v == "" {
		return 0, false
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return 0, false
	}
	syscall.CloseOnExec(fd)
	successorState.readyFD = fd
	successorState.from, _ = strconv.Atoi(os.Getenv(envHandoffFrom))
	_ = os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	_ = os.Unsetenv(envHandoffReady)
	_ = os.Unsetenv(envHandoffFrom)
	return successorState.from, true
}

// DataPlaneServing tells the process handing over (if this one is its
// successor) that this data plane answers now, so it may stop. Call it
// once the data plane really answers (DNS: after the first load; proxy:
// after the first config load). Elsewhere it does nothing.
func DataPlaneServing() {
	successorState.once.Do(func() {
		if successorState.readyFD < 3 {
			return
		}
		f := os.NewFile(uintptr(successorState.readyFD), "handoff-ready")
		_, _ = f.Write([]byte{1})
		_ = f.Close()
		successorState.readyFD = -1
	})
}

// startSuccessor starts this command line again with socks and waits
// until the successor's data plane answers. It returns the successor's
// pid; on an error no successor runs.
func startSuccessor(ctx context.Context, socks []HandoffSocket, log hclog.Logger) (int, error) {
	if len(socks) == 0 {
		return 0, errors.New("no listening sockets to hand over")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("handoff pipe: %w", err)
	}
	defer r.Close()
	files := []uintptr{0, 1, 2}
	names := make([]string, 0, len(socks))
	for _, s := range socks {
		files = append(files, uintptr(s.FD))
		names = append(names, s.Name)
	}
	readyFD := len(files)
	// Fd, not the os.File, stays out of the descriptors' blocking mode: the
	// pipe is ours alone.
	files = append(files, w.Fd())
	env := successorEnv(os.Environ(), len(socks), names, readyFD)
	pid, err := syscall.ForkExec(os.Args[0], os.Args, &syscall.ProcAttr{Env: env, Files: files})
	_ = w.Close()
	if err != nil {
		return 0, fmt.Errorf("start successor %s: %w", os.Args[0], err)
	}
	log.Info("handoff: successor started; serving beside it until it answers", "pid", pid, "binary", os.Args[0], "sockets", names)
	exited := make(chan error, 1)
	go func() {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == nil {
			err = fmt.Errorf("successor exited (%s)", waitString(ws))
		}
		exited <- err
	}()
	ready := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		n, err := r.Read(b)
		if n == 1 {
			err = nil
		} else if err == nil {
			err = errors.New("successor closed the ready pipe")
		}
		ready <- err
	}()
	select {
	case err = <-ready:
		if err == nil {
			return pid, nil
		}
		// A closed pipe mostly means the successor exited: say how.
		select {
		case xerr := <-exited:
			return 0, xerr
		case <-time.After(time.Second):
		}
		err = fmt.Errorf("successor never reported serving: %w", err)
	case err = <-exited:
		return 0, err
	case <-time.After(HandoffTimeout):
		err = fmt.Errorf("successor did not answer within %s", HandoffTimeout)
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-exited
	return 0, err
}

// successorEnv is env without any systemd socket-passing or handoff
// variables, plus those of this handoff.
func successorEnv(env []string, n int, names []string, readyFD int) []string {
	out := make([]string, 0, len(env)+5)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", envHandoffReady, envHandoffFrom:
			continue
		}
		out = append(out, kv)
	}
	return append(out,
		"LISTEN_PID=", // set by the successor itself (takeHandoffEnv)
		"LISTEN_FDS="+strconv.Itoa(n),
		"LISTEN_FDNAMES="+strings.Join(names, ":"),
		envHandoffReady+"="+strconv.Itoa(readyFD),
		envHandoffFrom+"="+strconv.Itoa(os.Getpid()))
}

func waitString(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
}

// HandoffReport is what a data plane writes beside its plugin socket when
// a handoff it was asked for failed and it keeps serving, so the host that
// sent HandoffSignal learns the failure at once instead of by waiting for
// a successor that is not coming (additive: hosts that do not read it
// only wait longer).
type HandoffReport struct {
	// Pid is the process that was asked to hand over and keeps serving.
	Pid int `json:"pid"`
	// Binary is the successor's path (the unit's ExecStart path).
	Binary string `json:"binary"`
	// Error says why the successor did not take over.
	Error string `json:"error"`
	// At is when the handoff was given up.
	At time.Time `json:"at"`
}

// HandoffReportPath returns the report path for a socket path:
// /run/ployz/plugins/dns.sock → /run/ployz/plugins/dns.handoff.json.
func HandoffReportPath(socket string) string {
	return strings.TrimSuffix(socket, ".sock") + ".handoff.json"
}

// WriteHandoffReport writes r to path atomically.
func WriteHandoffReport(path string, r HandoffReport) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode handoff report: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write handoff report: %w", err)
	}
	return nil
}

// ReadHandoffReport reads a report written by WriteHandoffReport; a
// missing file is returned as an error wrapping fs.ErrNotExist.
func ReadHandoffReport(path string) (HandoffReport, error) {
	var r HandoffReport
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("read handoff report: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decode handoff report %s: %w", path, err)
	}
	return r, nil
}
