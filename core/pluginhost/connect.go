package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/ployz/ployz/sdk"
	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
)

// RefusedError means the host will not run a plugin until its manifest
// entry changes: retrying cannot help.
type RefusedError struct {
	// Plugin is the refused plugin's name.
	Plugin string
	// Err is the reason.
	Err error
}

// Error names the plugin and the reason.
func (e *RefusedError) Error() string {
	var mismatch *DigestMismatchError
	if errors.As(e.Err, &mismatch) {
		return mismatch.Error() // already names the plugin
	}
	return fmt.Sprintf("plugin %q refused: %v", e.Plugin, e.Err)
}

// Unwrap returns the reason.
func (e *RefusedError) Unwrap() error { return e.Err }

func refuse(plugin string, format string, args ...any) error {
	return &RefusedError{Plugin: plugin, Err: fmt.Errorf(format, args...)}
}

// instance is one connection to one plugin process.
type instance struct {
	client    *plugin.Client
	conn      *grpc.ClientConn
	info      *pluginv1.InfoResponse
	api       uint32
	pid       int
	longLived bool
	launched  bool
	running   string // digest of the running executable, when readable
	handoff   bool   // the process answers sdk.HandoffSignal (its reattach record says so)
}

// release ends this host's hold on the plugin: a managed child is stopped,
// a long-lived plugin is only disconnected from and keeps serving.
func (i *instance) release() {
	if i.longLived {
		// Never the protocol client's Close: it would ask the plugin to stop.
		_ = i.conn.Close()
		return
	}
	i.client.Kill()
}

const callTimeout = 10 * time.Second

// startManaged verifies and starts a managed plugin binary.
func (h *Host) startManaged(ctx context.Context, e Entry) (*instance, error) {
	path := BlobPath(h.cfg.Dir, e.SHA256)
	if err := VerifyInstalled(h.cfg.Dir, e.Name, e.SHA256); err != nil {
		return nil, &RefusedError{Plugin: e.Name, Err: err}
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          sdk.HostPluginSet(),
		Cmd:              exec.Command(path),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           h.cfg.Logger.Named(e.Name),
		StartTimeout:     20 * time.Second,
	})
	conn, err := sdk.Dispense(client)
	if err != nil {
		client.Kill()
		if isHandshakeMismatch(err) {
			return nil, refuse(e.Name, "handshake mismatch (host speaks go-plugin protocol %d): %w", sdk.HandshakeVersion, err)
		}
		return nil, fmt.Errorf("plugin %q: start %s: %w", e.Name, path, err)
	}
	inst := &instance{client: client, conn: conn, launched: true, running: e.SHA256}
	if err := h.handshake(ctx, e, inst); err != nil {
		client.Kill()
		return nil, err
	}
	return inst, nil
}

// isHandshakeMismatch recognises go-plugin's refusals of a plugin built
// against another handshake.
func isHandshakeMismatch(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "incompatible api version") ||
		strings.Contains(s, "incompatible core api version") ||
		strings.Contains(s, "unrecognized remote plugin message")
}

// attachLongLived attaches to the process serving a long-lived plugin's
// socket. When none answers it verifies the installed binary and only then
// starts one: through Units (ployz-plugin@<name>.service, whose
// ExecStartPre verifies again) or, with LaunchLongLived, as its own session.
// Attaching to a process that already serves starts nothing, so it needs no
// verification; a running binary that differs from the installed one is
// handled by the supervisor (switchLongLived).
func (h *Host) attachLongLived(ctx context.Context, e Entry) (*instance, error) {
	socket := h.socketFor(e)
	inst, err := h.reattach(ctx, e, socket)
	var refused *RefusedError
	if err == nil || errors.As(err, &refused) {
		return inst, err
	}
	if h.cfg.Units == nil && !h.cfg.LaunchLongLived {
		return nil, fmt.Errorf("plugin %q: no long-lived process answers on %s (start %s): %w", e.Name, socket, UnitName(e.Name), err)
	}
	path := BlobPath(h.cfg.Dir, e.SHA256)
	if err := VerifyInstalled(h.cfg.Dir, e.Name, e.SHA256); err != nil {
		return nil, &RefusedError{Plugin: e.Name, Err: err}
	}
	pid := 0
	if h.cfg.Units != nil {
		h.log.Info("no long-lived process answers; starting its unit", "plugin", e.Name, "unit", UnitName(e.Name), "reason", err)
		if err := h.cfg.Units.Start(ctx, UnitName(e.Name)); err != nil {
			return nil, fmt.Errorf("plugin %q: %w", e.Name, err)
		}
	} else {
		h.log.Info("no long-lived process answers; launching one", "plugin", e.Name, "socket", socket, "reason", err)
		if pid, err = h.launch(e, path, socket); err != nil {
			return nil, err
		}
	}
	if err := waitReattach(ctx, socket, pid, 20*time.Second); err != nil {
		return nil, fmt.Errorf("plugin %q: started, but: %w", e.Name, err)
	}
	inst, err = h.reattach(ctx, e, socket)
	if err != nil {
		return nil, err
	}
	inst.launched = true
	return inst, nil
}

// reattach attaches through the reattach record beside socket.
func (h *Host) reattach(ctx context.Context, e Entry, socket string) (*instance, error) {
	rec, err := sdk.ReadReattach(sdk.ReattachPath(socket))
	if err != nil {
		return nil, err
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          sdk.HostPluginSet(),
		Reattach:         rec.Config(),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           h.cfg.Logger.Named(e.Name),
	})
	conn, err := sdk.Dispense(client)
	if err != nil {
		return nil, fmt.Errorf("attach pid %d on %s: %w", rec.Pid, socket, err)
	}
	inst := &instance{client: client, conn: conn, longLived: true, handoff: rec.Handoff}
	if err := h.handshake(ctx, e, inst); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if inst.pid != rec.Pid {
		// The record is stale and another process answers; trust what answers.
		h.log.Warn("reattach record names another pid than the process answering",
			"plugin", e.Name, "record_pid", rec.Pid, "serving_pid", inst.pid)
	}
	if d, err := FileDigest(filepath.Join("/proc", fmt.Sprint(inst.pid), "exe")); err == nil {
		inst.running = d
	}
	return inst, nil
}

// handshake reads Info, checks it against the entry, negotiates the
// plugin-API version and sends the configuration.
func (h *Host) handshake(ctx context.Context, e Entry, inst *instance) error {
	base := pluginv1.NewPluginClient(inst.conn)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	info, err := base.Info(cctx, &pluginv1.InfoRequest{})
	if err != nil {
		return fmt.Errorf("plugin %q: Info: %w", e.Name, err)
	}
	inst.info, inst.pid = info, int(info.GetPid())
	if info.GetName() != e.Name {
		return refuse(e.Name, "binary reports name %q", info.GetName())
	}
	for _, c := range info.GetCapabilities() {
		if err := sdk.ValidCapability(c); err != nil {
			return refuse(e.Name, "%v", err)
		}
	}
	v, ok := sdk.Negotiate(h.cfg.APIVersions, info.GetApiVersions())
	if !ok {
		return refuse(e.Name, "no plugin-API version in common: plugin speaks %v, host speaks %v",
			info.GetApiVersions(), h.cfg.APIVersions)
	}
	inst.api = v
	if _, err := base.Configure(cctx, &pluginv1.ConfigureRequest{ApiVersion: v, Config: h.configFor(e)}); err != nil {
		return refuse(e.Name, "Configure (plugin-API v%d): %w", v, err)
	}
	return nil
}

// launch starts a long-lived plugin in its own session so it outlives this
// host, logging to <SocketDir>/<name>.log.
func (h *Host) launch(e Entry, path, socket string) (int, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return 0, fmt.Errorf("plugin %q: create socket directory: %w", e.Name, err)
	}
	logPath := strings.TrimSuffix(socket, ".sock") + ".log"
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return 0, fmt.Errorf("plugin %q: open log: %w", e.Name, err)
	}
	defer logf.Close()
	cmd := exec.Command(path, "serve", "--socket", socket)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("plugin %q: launch %s: %w", e.Name, path, err)
	}
	// Reap it if it dies while we run; it is not ours to stop.
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// waitReattach waits until the record beside socket names pid (any
// process whose socket answers, for pid 0).
func waitReattach(ctx context.Context, socket string, pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		r, err := sdk.ReadReattach(sdk.ReattachPath(socket))
		if err == nil && (r.Pid == pid || pid == 0 && answers(socket)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no reattach record for pid %d beside %s after %s", pid, socket, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func answers(socket string) bool {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// capabilities returns the instance's capabilities, sorted.
func (i *instance) capabilities() []string {
	c := slices.Clone(i.info.GetCapabilities())
	slices.Sort(c)
	return c
}
