package plugintest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/ployz/ployz/sdk"
	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
)

// Plugin is a plugin process seen from the in-process test host.
type Plugin struct {
	// Client is the go-plugin client (managed or reattached).
	Client *plugin.Client
	// Conn is the gRPC connection; build kind clients on it.
	Conn *grpc.ClientConn
	// Base is the ployz.plugin.v1.Plugin client.
	Base pluginv1.PluginClient
	// Info is the plugin's answer to Info at start.
	Info *pluginv1.InfoResponse
}

// Start starts binary as a managed go-plugin child, exactly as ployzd does,
// and calls Info. The child is killed when the test ends.
func Start(t testing.TB, binary string) *Plugin {
	t.Helper()
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          sdk.HostPluginSet(),
		Cmd:              exec.Command(binary),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           testLogger(),
		StartTimeout:     20 * time.Second,
	})
	t.Cleanup(c.Kill)
	return connect(t, c)
}

// Attach attaches to the long-lived plugin serving socket through its
// reattach record. Ending the test detaches without stopping the plugin.
func Attach(t testing.TB, socket string) *Plugin {
	t.Helper()
	rec, err := sdk.ReadReattach(sdk.ReattachPath(socket))
	if err != nil {
		t.Fatalf("attach %s: %v", socket, err)
	}
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          sdk.HostPluginSet(),
		Reattach:         rec.Config(),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           testLogger(),
	})
	p := connect(t, c)
	// Close only our connection: the protocol client's Close would ask the
	// plugin to shut down.
	t.Cleanup(func() { _ = p.Conn.Close() })
	return p
}

func connect(t testing.TB, c *plugin.Client) *Plugin {
	t.Helper()
	conn, err := sdk.Dispense(c)
	if err != nil {
		t.Fatalf("start plugin: %v", err)
	}
	base := pluginv1.NewPluginClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := base.Info(ctx, &pluginv1.InfoRequest{})
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	return &Plugin{Client: c, Conn: conn, Base: base, Info: info}
}

// Configure negotiates the plugin-API version against this SDK's versions,
// sends config, and returns the version chosen.
func (p *Plugin) Configure(t testing.TB, config []byte) uint32 {
	t.Helper()
	v, ok := sdk.Negotiate(sdk.SupportedAPIVersions, p.Info.GetApiVersions())
	if !ok {
		t.Fatalf("plugin %q speaks API versions %v, SDK speaks %v: none in common",
			p.Info.GetName(), p.Info.GetApiVersions(), sdk.SupportedAPIVersions)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Base.Configure(ctx, &pluginv1.ConfigureRequest{ApiVersion: v, Config: config}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return v
}

// ServeLongLived runs binary in long-lived mode on socket as its own process
// (the way a systemd unit would), with any extra arguments after
// `serve --socket SOCKET`, and waits until its reattach record names it.
// The process is stopped with SIGTERM when the test ends.
func ServeLongLived(t testing.TB, binary, socket string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--socket", socket}, extra...)...)
	cmd.Stderr = os.Stderr
	// Its own session, as under systemd: no signal aimed at the test's
	// process group reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	if err := WaitReattach(socket, cmd.Process.Pid, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// WaitReattach waits until the reattach record beside socket names pid.
func WaitReattach(socket string, pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		r, err := sdk.ReadReattach(sdk.ReattachPath(socket))
		if err == nil && r.Pid == pid {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("record names pid %d, want %d", r.Pid, pid)
			}
			return fmt.Errorf("long-lived plugin on %s did not come up: %w", socket, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "plugintest", Level: hclog.Warn, Output: os.Stderr})
}
