package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/sdk"
)

// Config configures a Host. Only Dir is required.
type Config struct {
	// Dir holds manifest.json and blobs/sha256/<digest> (DefaultDir).
	Dir string
	// SocketDir is where long-lived plugins listen unless their entry names
	// a socket (default sdk.DefaultSocketDir).
	SocketDir string
	// APIVersions are the plugin-API versions this host speaks (default
	// sdk.SupportedAPIVersions).
	APIVersions []uint32
	// HealthInterval is how often a healthy plugin is checked (default 2s).
	HealthInterval time.Duration
	// RestartDelay is the first wait before reconnecting to a plugin that
	// died; it doubles up to MaxRestartDelay (defaults 1s and 30s).
	RestartDelay time.Duration
	// MaxRestartDelay caps the doubling restart delay.
	MaxRestartDelay time.Duration
	// LaunchLongLived makes the host start a long-lived plugin itself, in
	// its own session, when none answers on its socket. Production leaves
	// this off and lets systemd run ployz-plugin@<name>.service; it exists
	// for development machines and tests without systemd.
	LaunchLongLived bool
	// Logger receives host logs and managed plugins' re-emitted logs.
	Logger hclog.Logger
	// OnChange is called with the served capability names after every
	// catalog change (for the Machine record and the RPC catalog). It must
	// not block.
	OnChange func(capabilities []string)
}

func (c *Config) setDefaults() error {
	if c.Dir == "" {
		return errors.New("pluginhost: Config.Dir is empty")
	}
	if c.SocketDir == "" {
		c.SocketDir = sdk.DefaultSocketDir
	}
	if len(c.APIVersions) == 0 {
		c.APIVersions = slices.Clone(sdk.SupportedAPIVersions)
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = 2 * time.Second
	}
	if c.RestartDelay <= 0 {
		c.RestartDelay = time.Second
	}
	if c.MaxRestartDelay < c.RestartDelay {
		c.MaxRestartDelay = max(30*time.Second, c.RestartDelay)
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return nil
}

// Host runs the plugins of one manifest.
type Host struct {
	cfg     Config
	log     hclog.Logger
	catalog *Catalog

	mu      sync.Mutex
	sups    []*supervisor
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a host for cfg; call Start to run the plugins.
func New(cfg Config) (*Host, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Host{cfg: cfg, log: cfg.Logger.Named("pluginhost"), catalog: NewCatalog()}, nil
}

// Start reads the manifest and runs every plugin in it. It returns once
// each plugin has had its first attempt (healthy, down or refused) or ctx
// ends; plugins keep running until Close. A plugin that fails never stops
// the others. Start fails only when the manifest cannot be read.
func (h *Host) Start(ctx context.Context) error {
	m, err := LoadManifest(ManifestPath(h.cfg.Dir))
	if err != nil {
		return err
	}
	h.mu.Lock()
	if h.started {
		h.mu.Unlock()
		return errors.New("pluginhost: already started")
	}
	h.started = true
	runCtx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	for _, e := range m.Plugins {
		s := newSupervisor(h, e)
		h.sups = append(h.sups, s)
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			s.run(runCtx)
		}()
	}
	sups := slices.Clone(h.sups)
	h.mu.Unlock()
	h.log.Info("plugin host started", "dir", h.cfg.Dir, "plugins", len(sups), "api_versions", h.cfg.APIVersions)
	for _, s := range sups {
		select {
		case <-s.firstDone:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// Close stops managed plugins and detaches from long-lived ones, which keep
// serving. It waits for the supervisors to finish.
func (h *Host) Close() error {
	h.mu.Lock()
	cancel := h.cancel
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	h.wg.Wait()
	return nil
}

// Status returns every plugin's status in manifest order.
func (h *Host) Status() []PluginStatus {
	h.mu.Lock()
	sups := slices.Clone(h.sups)
	h.mu.Unlock()
	out := make([]PluginStatus, 0, len(sups))
	for _, s := range sups {
		out = append(out, s.status())
	}
	return out
}

// Catalog returns the capability catalog.
func (h *Host) Catalog() *Catalog { return h.catalog }

// Capabilities returns the capability names healthy plugins serve now.
func (h *Host) Capabilities() []string { return h.catalog.Capabilities() }

// Available reports whether a healthy plugin serves capability now; it
// fits rpc.Route.Available for routes backed by a plugin.
func (h *Host) Available(capability string) bool {
	_, err := h.catalog.Lookup(capability)
	return err == nil
}

// Conn routes a call for capability: it returns the connection to the
// plugin serving it, or a refusal carrying details.capability.
func (h *Host) Conn(capability string) (*grpc.ClientConn, error) {
	p, err := h.catalog.Lookup(capability)
	if err != nil {
		return nil, err
	}
	return p.Conn, nil
}

// Call runs fn against the plugin serving capability. When the plugin
// vanishes mid-call (the transport fails), the error becomes a refusal
// naming the capability too, so callers see one kind of refusal.
func (h *Host) Call(ctx context.Context, capability string, fn func(context.Context, *grpc.ClientConn) error) error {
	p, err := h.catalog.Lookup(capability)
	if err != nil {
		return err
	}
	err = fn(ctx, p.Conn)
	if status.Code(err) == codes.Unavailable {
		if _, ok := CapabilityFromError(err); !ok {
			return CapabilityError(codes.Unavailable, capability,
				fmt.Sprintf("capability %s is unavailable: plugin %q stopped answering: %v", capability, p.Plugin, status.Convert(err).Message()))
		}
	}
	return err
}

// changed tells OnChange about the catalog's new contents.
func (h *Host) changed() {
	if h.cfg.OnChange != nil {
		h.cfg.OnChange(h.catalog.Capabilities())
	}
}

// socketFor returns a long-lived plugin's socket path.
func (h *Host) socketFor(e Entry) string {
	if e.Socket != "" {
		return e.Socket
	}
	return filepath.Join(h.cfg.SocketDir, e.Name+".sock")
}
