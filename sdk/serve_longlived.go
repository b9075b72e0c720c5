package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServeLongLived serves p on the unix socket path until ctx ends or a host
// asks it to shut down. Unlike managed mode it does not need a host to start
// it and keeps serving when hosts come and go: run it under systemd.
//
// It writes the Reattach record to ReattachPath(socket) and prints the same
// JSON on stdout; a host reads the file and attaches with Reattach.Config.
// It refuses to start when another process already answers on the socket.
func ServeLongLived(ctx context.Context, p *Plugin, socket string, logger hclog.Logger) error {
	return serveLongLived(ctx, p, socket, logger, longLivedOpts{})
}

// longLivedOpts are what a data plane adds to ServeLongLived.
type longLivedOpts struct {
	// takeover: this process is a handoff successor; the process handing
	// over still answers on the socket, whose path this one takes over.
	takeover bool
	// handoff: the process answers HandoffSignal (Reattach.Handoff).
	handoff bool
}

func serveLongLived(ctx context.Context, p *Plugin, socket string, logger hclog.Logger, opts longLivedOpts) error {
	if err := p.Validate(); err != nil {
		return err
	}
	// A host or journald that goes away must not kill us through SIGPIPE
	// when we write a log line: serving outlives them.
	signal.Ignore(syscall.SIGPIPE)

	l, err := listenSocket(socket, opts.takeover)
	if err != nil {
		return err
	}
	// The listener must not unlink the path on close: a successor may own it.
	l.SetUnlinkOnClose(false)

	// go-plugin's server streams stdout/stderr to the host; a long-lived
	// plugin keeps its own stdio (the journal), so give it idle pipes. Their
	// writers are never closed on purpose: go-plugin's copier would log the
	// EOF through the logger this exported server type leaves nil.
	idleOut, _ := io.Pipe()
	idleErr, _ := io.Pipe()
	var gs *grpc.Server
	d := newDrainer()
	srv := &plugin.GRPCServer{
		Plugins: PluginSet(p),
		Server: func(opts []grpc.ServerOption) *grpc.Server {
			opts = append(opts, grpc.ChainUnaryInterceptor(refuseHostShutdown))
			gs = grpc.NewServer(append(opts, d.options()...)...)
			return gs
		},
		Stdout: idleOut,
		Stderr: idleErr,
		DoneCh: make(chan struct{}),
	}
	if err := srv.Init(); err != nil {
		_ = l.Close()
		return fmt.Errorf("init plugin server: %w", err)
	}

	rec := Reattach{
		Name:            p.Name,
		Protocol:        string(plugin.ProtocolGRPC),
		ProtocolVersion: HandshakeVersion,
		Network:         "unix",
		Addr:            socket,
		Pid:             os.Getpid(),
		Handoff:         opts.handoff,
	}
	rpath := ReattachPath(socket)
	if err := WriteReattach(rpath, rec); err != nil {
		_ = l.Close()
		return err
	}
	defer removeIfOurs(socket, rpath, rec.Pid, logger)

	go srv.Serve(l)
	if line, err := json.Marshal(rec); err == nil {
		fmt.Fprintln(os.Stdout, string(line))
	}
	if !opts.takeover { // a successor is made ready by the process handing over (MAINPID=)
		notifyReady(logger)
	}
	logger.Info("serving long-lived", "socket", socket, "reattach", rpath, "pid", rec.Pid)

	select {
	case <-ctx.Done():
		logger.Info("stopping gracefully", "reason", context.Cause(ctx))
		d.stop(gs, StopTimeout)
		<-srv.DoneCh
	case <-srv.DoneCh:
		logger.Info("plugin server stopped")
	}
	return nil
}

// controllerShutdown is go-plugin's "stop the plugin" call, which its
// Client.Close and Client.Kill send.
const controllerShutdown = "/plugin.GRPCController/Shutdown"

// refuseHostShutdown keeps a long-lived plugin serving when a host closes
// its go-plugin client: only the plugin's systemd unit stops it.
func refuseHostShutdown(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if info.FullMethod == controllerShutdown {
		return nil, status.Error(codes.PermissionDenied, "a long-lived plugin is stopped by its systemd unit, not by a host")
	}
	return h(ctx, req)
}

// listenSocket binds path, first making sure no live process serves it
// (unless takeover: a handoff successor replaces the path's listener) and
// clearing a stale socket left by a crash.
func listenSocket(path string, takeover bool) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if takeover {
		// The old process keeps its listener (and calls in flight) until it
		// stops; new dials reach this one.
	} else if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return nil, fmt.Errorf("socket %s is already served by another process", path)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Net: "unix", Name: path})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Only root and the socket's group (ployzd) may call the plugin.
	if err := os.Chmod(path, 0o660); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return l, nil
}

// removeIfOurs deletes the socket and record only while the record still
// names this process, so a stopping plugin never deletes a successor's.
func removeIfOurs(socket, rpath string, pid int, logger hclog.Logger) {
	r, err := ReadReattach(rpath)
	if err != nil || r.Pid != pid {
		return
	}
	for _, p := range []string{socket, rpath} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			logger.Warn("cleanup failed", "path", p, "error", err)
		}
	}
}

// notifyReady tells systemd (Type=notify units) that the socket is served.
// It is a no-op outside systemd.
func notifyReady(logger hclog.Logger) {
	if err := sdNotify("READY=1"); err != nil {
		logger.Warn("sd_notify failed", "error", err)
	}
}

// sdNotify sends state (and fds) to $NOTIFY_SOCKET; without one it does
// nothing.
func sdNotify(state string, fds ...int) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	// SOCK_CLOEXEC is Linux-only and sdk builds for the CLI on macOS too.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return fmt.Errorf("notify socket: %w", err)
	}
	defer syscall.Close(fd)
	syscall.CloseOnExec(fd)
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	// syscall maps a leading '@' to the abstract namespace.
	if err := syscall.Sendmsg(fd, []byte(state), oob, &syscall.SockaddrUnix{Name: addr}, 0); err != nil {
		return fmt.Errorf("notify %s: %w", addr, err)
	}
	return nil
}

// sdBarrier waits until systemd has handled every notification sent
// before it (BARRIER=1: it closes the pipe end it was given), or timeout.
func sdBarrier(timeout time.Duration) error {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	var serr error
	rc, err := w.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) { serr = sdNotify("BARRIER=1", int(fd)) })
	}
	_ = w.Close()
	if err = errors.Join(err, serr); err != nil {
		return err
	}
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	_, err = r.Read(make([]byte, 1))
	if errors.Is(err, io.EOF) {
		return nil
	}
	return fmt.Errorf("no barrier answer: %w", err)
}
