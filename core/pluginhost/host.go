package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/sdk"
	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
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
	// HealthInterval is how often a healthy plugin at rest is checked
	// and its Info read again (default DefaultHealthInterval). A plugin
	// whose process exits or whose connection drops is checked at once,
	// whatever the interval (supervisor.watch).
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
	// StartTimeout bounds how long a call waits for an on-demand plugin
	// (Entry.OnDemand) to start (default DefaultStartTimeout).
	StartTimeout time.Duration
	// Units, when set, lets the host start ployz-plugin@<name>.service for
	// a long-lived plugin no process serves, and restart it onto a newly
	// installed binary once that binary verifies. Nil only attaches (and
	// `ployzd plugins ls` runs that way).
	Units Units
}

// Health checking: a healthy plugin at rest is checked every
// HealthInterval; a check answers within healthTimeout; after a failed
// one the next comes after failedRecheck (two in a row withdraw the
// plugin). An exit or a dropped connection is seen at once. The
// manifest is looked at every manifestInterval.
const (
	DefaultHealthInterval = 10 * time.Second
	DefaultStartTimeout   = 10 * time.Second
	healthTimeout         = 2 * time.Second
	failedRecheck         = time.Second
	manifestInterval      = 2 * time.Second
)

// Units starts and restarts systemd units; ployzd passes its own.
type Units interface {
	// Start starts the unit unless it runs.
	Start(ctx context.Context, unit string) error
	// Restart restarts the unit.
	Restart(ctx context.Context, unit string) error
}

// UnitName is the systemd unit that runs long-lived plugin name
// (packaging/systemd/ployz-plugin@.service).
func UnitName(name string) string { return "ployz-plugin@" + name + ".service" }

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
		c.HealthInterval = DefaultHealthInterval
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
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
	configs map[string][]byte // SetConfig overrides, by plugin name
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a host for cfg; call Start to run the plugins.
func New(cfg Config) (*Host, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Host{cfg: cfg, log: cfg.Logger.Named("pluginhost"), catalog: NewCatalog(), configs: map[string][]byte{}}, nil
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
		h.addLocked(runCtx, e)
	}
	sups := slices.Clone(h.sups)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.watchManifest(runCtx)
	}()
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

// addLocked starts supervising e; h.mu is held.
func (h *Host) addLocked(ctx context.Context, e Entry) {
	s := newSupervisor(h, e)
	h.sups = append(h.sups, s)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		s.run(ctx)
	}()
}

// watchManifest re-reads the manifest when it changed (a stat every
// manifestInterval, or HealthInterval when shorter), so a plugin
// installed or swapped (`ployzd plugins install`) while the host runs is
// picked up: a new entry is supervised, a changed digest is verified and
// switched to. Removing an entry takes a host restart.
func (h *Host) watchManifest(ctx context.Context) {
	path := ManifestPath(h.cfg.Dir)
	var last time.Time
	for sleep(ctx, min(manifestInterval, h.cfg.HealthInterval)) {
		st, err := os.Stat(path)
		if err != nil || st.ModTime().Equal(last) {
			continue
		}
		m, err := LoadManifest(path)
		if err != nil {
			h.log.Error("plugin manifest unreadable; keeping the plugins as they are", "error", err)
			continue
		}
		last = st.ModTime()
		h.mu.Lock()
		for _, e := range m.Plugins {
			var found *supervisor
			for _, s := range h.sups {
				if s.entry().Name == e.Name {
					found = s
				}
			}
			switch {
			case found == nil:
				h.log.Info("plugin installed", "plugin", e.Name, "sha256", e.SHA256)
				h.addLocked(ctx, e)
			case !found.entry().equal(e):
				h.log.Info("plugin entry changed", "plugin", e.Name, "sha256", e.SHA256)
				found.setEntry(e)
			}
		}
		h.mu.Unlock()
	}
}

// SetConfig replaces the configuration the host hands plugin name through
// Configure (instead of its manifest config) and sends it now when the
// plugin is connected; every later attach sends it too. ployzd uses it for
// what a plugin needs from the daemon (docs/plugins.md).
func (h *Host) SetConfig(ctx context.Context, name string, config []byte) error {
	h.mu.Lock()
	h.configs[name] = slices.Clone(config)
	var sup *supervisor
	for _, s := range h.sups {
		if s.entry().Name == name {
			sup = s
		}
	}
	h.mu.Unlock()
	if sup == nil {
		return fmt.Errorf("plugin %q is not installed", name)
	}
	return sup.reconfigure(ctx)
}

// configFor returns what Configure carries for e.
func (h *Host) configFor(e Entry) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.configs[e.Name]; ok {
		return c
	}
	return e.Config
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

// Available reports whether a healthy plugin serves capability now, or an
// on-demand one would once started; it fits rpc.Route.Available for
// routes backed by a plugin.
func (h *Host) Available(capability string) bool {
	_, err := h.catalog.Lookup(capability)
	return err == nil
}

// Conn routes a call for capability: it returns the connection to the
// plugin serving it (starting an on-demand plugin first, within
// StartTimeout), or a refusal carrying details.capability.
func (h *Host) Conn(capability string) (*grpc.ClientConn, error) {
	p, err := h.provider(context.Background(), capability)
	if err != nil {
		return nil, err
	}
	return p.Conn, nil
}

// Call runs fn against the plugin serving capability, starting an
// on-demand plugin first (within StartTimeout). When the plugin vanishes
// mid-call (the transport fails), the error becomes a refusal naming the
// capability too, so callers see one kind of refusal.
func (h *Host) Call(ctx context.Context, capability string, fn func(context.Context, *grpc.ClientConn) error) error {
	p, err := h.provider(ctx, capability)
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

// provider returns capability's provider with a connection: an on-demand
// plugin advertising it is started and waited for, at most StartTimeout.
// A start that fails or takes longer is a refusal naming the plugin; the
// next call tries again.
func (h *Host) provider(ctx context.Context, capability string) (Provider, error) {
	p, err := h.catalog.Lookup(capability)
	if err != nil || p.Conn != nil {
		return p, err
	}
	s := h.supervisor(p.Plugin)
	if s == nil {
		return Provider{}, CapabilityError(codes.Unavailable, capability,
			fmt.Sprintf("capability %s is unavailable: plugin %q is not installed", capability, p.Plugin))
	}
	if a := s.demand(); a != nil {
		h.log.Info("starting on-demand plugin for a call", "plugin", p.Plugin, "capability", capability)
		t := time.NewTimer(h.cfg.StartTimeout)
		defer t.Stop()
		select {
		case <-a.done:
		case <-t.C:
			return Provider{}, CapabilityError(codes.Unavailable, capability,
				fmt.Sprintf("capability %s is unavailable: on-demand plugin %q did not start within %s", capability, p.Plugin, h.cfg.StartTimeout))
		case <-ctx.Done():
			return Provider{}, CapabilityError(codes.Unavailable, capability,
				fmt.Sprintf("capability %s is unavailable: waiting for on-demand plugin %q to start: %v", capability, p.Plugin, ctx.Err()))
		}
		if a.err != nil {
			return Provider{}, CapabilityError(codes.Unavailable, capability,
				fmt.Sprintf("capability %s is unavailable: on-demand plugin %q did not start: %v", capability, p.Plugin, a.err))
		}
	}
	p, err = h.catalog.Lookup(capability)
	if err == nil && p.Conn == nil {
		err = CapabilityError(codes.Unavailable, capability,
			fmt.Sprintf("capability %s is unavailable: on-demand plugin %q started without serving it", capability, p.Plugin))
	}
	return p, err
}

// Wake starts on-demand plugin name without waiting for it, e.g. once the
// Machine has what makes it useful (the volume plugin: a ZFS pool). It
// does nothing for a plugin that runs or is starting, or is not on
// demand; a start that fails leaves it idle for the next Wake or call.
func (h *Host) Wake(name string) error {
	s := h.supervisor(name)
	if s == nil {
		return fmt.Errorf("plugin %q is not installed", name)
	}
	if s.entry().OnDemand {
		s.demand()
	}
	return nil
}

// supervisor returns plugin name's supervisor, nil when none.
func (h *Host) supervisor(name string) *supervisor {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.sups {
		if s.entry().Name == name {
			return s
		}
	}
	return nil
}

// advertised reads the capabilities an on-demand plugin serves from its
// installed binary's `info`, without starting it as a server: the binary
// is verified first and checked as a start would (name, plugin-API
// version, capability names); a failure refuses it.
func (h *Host) advertised(ctx context.Context, e Entry) (*pluginv1.InfoResponse, error) {
	if err := VerifyInstalled(h.cfg.Dir, e.Name, e.SHA256); err != nil {
		return nil, &RefusedError{Plugin: e.Name, Err: err}
	}
	info, err := Fingerprint(ctx, BlobPath(h.cfg.Dir, e.SHA256))
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", e.Name, err)
	}
	if err := CheckCompatible(info, e.Name, h.cfg.APIVersions); err != nil {
		return nil, &RefusedError{Plugin: e.Name, Err: err}
	}
	slices.Sort(info.Capabilities)
	return info, nil
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
