package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/ployz/ployz/internal/fsutil"
)

// DefaultSocketDir is where long-lived plugins listen by convention.
const DefaultSocketDir = "/run/ployz/plugins"

// DefaultSocket returns the conventional socket path of a long-lived plugin.
func DefaultSocket(name string) string {
	return filepath.Join(DefaultSocketDir, name+".sock")
}

// Reattach is what a long-lived plugin writes next to its socket (and prints
// on stdout) so a host can attach to it with go-plugin's ReattachConfig.
type Reattach struct {
	// Name is the plugin name.
	Name string `json:"name"`
	// Protocol is the go-plugin protocol, always "grpc".
	Protocol string `json:"protocol"`
	// ProtocolVersion is the handshake version, HandshakeVersion.
	ProtocolVersion int `json:"protocol_version"`
	// Network is the listener network, "unix".
	Network string `json:"network"`
	// Addr is the socket path.
	Addr string `json:"addr"`
	// Pid is the serving process.
	Pid int `json:"pid"`
	// Handoff says the process answers HandoffSignal by starting its
	// successor on its sockets before it stops (additive: older records
	// lack it, and a host restarts those plugins' units instead).
	Handoff bool `json:"handoff,omitempty"`
}

// ReattachPath returns the reattach record path for a socket path:
// /run/ployz/plugins/dns.sock → /run/ployz/plugins/dns.reattach.json.
func ReattachPath(socket string) string {
	return strings.TrimSuffix(socket, ".sock") + ".reattach.json"
}

// Config converts the record to a go-plugin ReattachConfig. It attaches
// through ReattachFunc with a runner that watches the process but never
// signals it: a long-lived plugin belongs to its systemd unit, so a host's
// Client.Kill (or a host crash) must leave it serving. go-plugin's Test flag
// would do the same but is documented as test-only, so it stays unset.
func (r Reattach) Config() *plugin.ReattachConfig {
	addr := &net.UnixAddr{Net: r.Network, Name: r.Addr}
	return &plugin.ReattachConfig{
		Protocol:        plugin.Protocol(r.Protocol),
		ProtocolVersion: r.ProtocolVersion,
		Addr:            addr,
		Pid:             r.Pid,
		ReattachFunc:    attachFunc(r.Pid, addr),
	}
}

// attachFunc checks that the socket answers and returns an attachedProcess.
func attachFunc(pid int, addr net.Addr) runner.ReattachFunc {
	return func() (runner.AttachedRunner, error) {
		c, err := net.DialTimeout(addr.Network(), addr.String(), 2*time.Second)
		if err != nil {
			return nil, fmt.Errorf("long-lived plugin pid %d does not answer on %s: %w", pid, addr, err)
		}
		_ = c.Close()
		return &attachedProcess{pid: pid, detached: make(chan struct{})}, nil
	}
}

// attachedProcess is a long-lived plugin as a host sees it: Wait returns
// when the process is gone or the host detached; Kill only detaches.
type attachedProcess struct {
	pid      int
	once     sync.Once
	detached chan struct{}
}

// processPollInterval paces Wait's liveness check of a process that is not
// the host's child (it cannot be waited for).
const processPollInterval = 250 * time.Millisecond

// Wait returns when the process no longer exists, the host detached or
// ctx ends. Where the kernel has pidfds it sleeps until the process exits
// (a host attached to five plugins polled twenty times a second at rest);
// elsewhere it polls.
func (a *attachedProcess) Wait(ctx context.Context) error {
	if waited, err := waitExit(ctx, a.pid, a.detached); waited {
		return err
	}
	t := time.NewTicker(processPollInterval)
	defer t.Stop()
	for processAlive(a.pid) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.detached:
			return nil
		case <-t.C:
		}
	}
	return nil
}

// Kill leaves the process alone (only its systemd unit stops it) and ends
// Wait, so go-plugin's Client.Kill returns instead of waiting for a process
// that is not going to exit.
func (a *attachedProcess) Kill(context.Context) error {
	a.once.Do(func() { close(a.detached) })
	return nil
}

// ID is the pid.
func (a *attachedProcess) ID() string { return strconv.Itoa(a.pid) }

// PluginToHost keeps addresses as they are (same host, same namespace).
func (a *attachedProcess) PluginToHost(n, addr string) (string, string, error) { return n, addr, nil }

// HostToPlugin keeps addresses as they are.
func (a *attachedProcess) HostToPlugin(n, addr string) (string, string, error) { return n, addr, nil }

// processAlive reports whether pid exists (EPERM: it exists, not ours).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// WriteReattach writes r to path atomically and durably (write, fsync,
// rename, fsync the directory), so a host never reads half a record.
func WriteReattach(path string, r Reattach) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode reattach record: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write reattach record: %w", err)
	}
	return nil
}

// ReadReattach reads a record written by WriteReattach.
func ReadReattach(path string) (Reattach, error) {
	var r Reattach
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("read reattach record: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decode reattach record %s: %w", path, err)
	}
	if r.Protocol != string(plugin.ProtocolGRPC) || r.Network != "unix" || r.Addr == "" || r.Pid <= 0 {
		return r, fmt.Errorf("reattach record %s is incomplete: %+v", path, r)
	}
	return r, nil
}
