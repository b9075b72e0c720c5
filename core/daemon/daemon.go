package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/daemon/feature/containers"
	jobsfeature "github.com/ployz/ployz/core/daemon/feature/jobs"
	"github.com/ployz/ployz/core/daemon/feature/leases"
	"github.com/ployz/ployz/core/daemon/feature/upgrade"
	"github.com/ployz/ployz/core/daemon/feature/volumes"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/machine/trust"
	"github.com/ployz/ployz/core/mesh"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/fdstore"
	"github.com/ployz/ployz/sdk/store"
)

// Ports from docs/architecture.md ("Network").
const (
	RPCPort    = 7569
	GossipPort = 7570
	// StoreAPIPort stays reserved for the store's optional TCP API
	// (feature.StoreAPIPort).
	StoreAPIPort = feature.StoreAPIPort
	// VolumePort is the volume transport: receive_volume only, for a
	// source Machine's send_volume_to, authenticated as Machine RPC.
	VolumePort = 7574
)

// Config locates the daemon's state and names its ports.
type Config struct {
	DataDir string // /var/lib/ployz
	RunDir  string // /run/ployz
	// Socket is the local Machine RPC socket (default RunDir/ployz.sock).
	Socket string
	// RPCPort is Machine RPC on the management address (default 7569).
	RPCPort int
	// VolumePort is the volume transport on the management address
	// (default 7574).
	VolumePort int
	// WireGuardPort is the mesh's UDP port (default 51820).
	WireGuardPort int
	// UserspaceWireGuard runs the mesh on wireguard-go (its own unit) even
	// where the kernel has the WireGuard module.
	UserspaceWireGuard bool
	// UnitDir is where systemd reads unit files (/etc/systemd/system);
	// ployzd writes Docker's drop-in there that restores namespace
	// isolation at boot. Empty: no drop-in (tests).
	UnitDir string
	// Units starts and stops the store's systemd unit.
	Units  Units
	Logger hclog.Logger
}

func (c *Config) defaults() {
	if c.DataDir == "" {
		c.DataDir = "/var/lib/ployz"
	}
	if c.RunDir == "" {
		c.RunDir = "/run/ployz"
	}
	if c.Socket == "" {
		c.Socket = filepath.Join(c.RunDir, "ployz.sock")
	}
	if c.RPCPort == 0 {
		c.RPCPort = RPCPort
	}
	if c.VolumePort == 0 {
		c.VolumePort = VolumePort
	}
	if c.WireGuardPort == 0 {
		c.WireGuardPort = mesh.DefaultListenPort
	}
	if c.Logger == nil {
		c.Logger = hclog.New(&hclog.LoggerOptions{Name: "ployzd", JSONFormat: true})
	}
	if c.Units == nil {
		c.Units = Systemd{}
	}
}

// Daemon is one running ployzd.
type Daemon struct {
	cfg Config
	log hclog.Logger
	rpc *rpc.Server
	// identity is this Machine's RPC identity; nil only in tests.
	identity *rpc.Identity
	// trust decides which machines rows this Machine acts on
	// (machinetrust.go); nil only in tests without an identity.
	trust *trust.Verifier

	plugins *pluginhost.Host
	// job is the scheduled-jobs feature (feature/jobs), made once: it
	// counts this Machine's job runs (jobFeature()).
	job     *jobsfeature.Feature
	jobOnce sync.Once
	// ctrs serves the Service Container commands (containers.go).
	ctrs *containers.Ops
	// vols is the volume feature (feature/volumes), made once: its copy
	// records and tasks are this Machine's (volumes()).
	vols     *volumes.Feature
	volsOnce sync.Once

	mu     sync.Mutex
	rec    machine.Record
	active *active       // what runs while joining or participating; nil otherwise
	kick   chan struct{} // asks publishLoop to write this Machine's row now
	// recordChanged is closed (and replaced) when the record's phase or
	// labels change, so loops waiting for participation start at once and
	// serving plugins follow the acceptance flags.
	recordChanged chan struct{}
	// peerGrace overrides departedGrace (tests).
	peerGrace time.Duration
	// lease is the lease feature (feature/leases), made once: it
	// serializes this entry's lease grants (leaseFeature()).
	lease     *leases.Feature
	leaseOnce sync.Once
	// iso is the namespace isolation this Machine enforces (isolation.go).
	iso isolation
}

// active holds the parts a Cluster member runs.
type active struct {
	cancel context.CancelFunc
	done   chan struct{}
	mesh   *mesh.Mesh
	store  *store.Client
	tcp    *grpc.Server
	volume *grpc.Server // the volume transport (VolumePort)
}

func (d *Daemon) recordPath() string { return filepath.Join(d.cfg.DataDir, "machine.json") }

// Run serves until ctx ends. Serving infrastructure (store, mesh device,
// plugins) keeps running after Run returns: only a reset stops it.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	// The sockets kept across the last restart become close-on-exec
	// before any child (a plugin, systemctl) could inherit one.
	fdstore.Claim()
	d := &Daemon{cfg: cfg, log: cfg.Logger}
	// Volume Run tasks run under the daemon's context.
	d.volsOnce.Do(func() { d.vols = volumes.New(ctx, featureHost{d}, d.log) })
	if err := ensureDataDir(cfg.DataDir); err != nil {
		return err
	}
	rec, err := machine.Load(d.recordPath())
	if err != nil {
		return err
	}
	if err := machine.Save(d.recordPath(), rec); err != nil { // keep a freshly minted ID
		return fmt.Errorf("save machine record: %w", err)
	}
	d.rec = rec
	d.log.Info("starting", "machine_id", rec.ID, "name", rec.Name, "phase", rec.Phase)
	if rec.Phase == machine.Resetting {
		if err := d.finishReset(ctx); err != nil {
			return fmt.Errorf("finish reset: %w", err)
		}
	}

	pluginDir := filepath.Join(cfg.DataDir, "plugins")
	d.installBundled(pluginDir)
	d.serving().RetireOldUnits(ctx, runtimeUnitDir)
	d.plugins, err = pluginhost.New(pluginhost.Config{
		Dir:      pluginDir,
		Logger:   d.log.Named("plugins"),
		OnChange: func([]string) { d.kickPublish() },
		Units:    cfg.Units,
	})
	if err != nil {
		return fmt.Errorf("plugin host: %w", err)
	}
	// Stops managed plugins; long-lived ones are only detached and keep serving.
	defer d.plugins.Close()
	go func() {
		if err := d.plugins.Start(ctx); err != nil {
			d.log.Error("plugins", "error", err)
		}
	}()

	// The RPC identity is this Machine's key on the mesh listener
	// (docs/security.md); it is made before any Cluster part starts.
	d.identity, err = rpc.LoadOrCreateIdentity(filepath.Join(cfg.DataDir, rpc.IdentityFile))
	if err != nil {
		return err
	}
	if d.trust, err = trust.Open(filepath.Join(cfg.DataDir, trust.PinsFile), d.identity.PublicKey(), d.log.Named("trust")); err != nil {
		return err
	}
	d.rpc = rpc.NewServer(rpc.Options{Logger: d.log.Named("rpc"), Local: d.local, Peers: d.peers,
		ExtraCapabilities: d.capabilities, Dial: d.dialPeer})
	d.routes()
	g := d.rpc.GRPCServer()
	lis, err := listenUnix(cfg.Socket)
	if err != nil {
		return err
	}
	go g.Serve(lis) // ends when the listener closes
	defer g.Stop()

	if rec.Phase == machine.Joining || rec.Phase == machine.Participating {
		// Keep serving RPC while the Cluster parts come up; at boot Docker
		// or the store may not answer yet, so a failed start is retried.
		go func() {
			for attempt := 1; ; attempt++ {
				err := d.activate(ctx)
				if err == nil || ctx.Err() != nil {
					return
				}
				d.log.Error("cluster parts did not start; retrying", "attempt", attempt, "error", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(5 * time.Second):
				}
			}
		}()
	}
	<-ctx.Done()
	d.deactivate()
	return nil
}

// installBundled installs the plugins shipped beside ployzd into the
// plugin store by digest; the host then runs, verifies and switches them
// like any other plugin. A failure leaves the installed ones as they are.
func (d *Daemon) installBundled(dir string) {
	exe, err := os.Executable()
	if err != nil {
		d.log.Warn("bundled plugins not installed", "error", err)
		return
	}
	done, err := pluginhost.InstallBundledFrom(dir, pluginhost.Bundled, upgrade.BundledSources(d.cfg.DataDir, filepath.Dir(exe)))
	for _, e := range done {
		d.log.Info("bundled plugin installed", "plugin", e.Name, "sha256", e.SHA256)
	}
	if err != nil {
		d.log.Error("bundled plugins not installed", "error", err)
	}
}

// capabilities are what the plugins serve and what this daemon applies
// without a command of its own (rpc.CapContainerHost, CapContainerRoutes,
// CapContainerAliases, CapContainerRedirects).
func (d *Daemon) capabilities() []string {
	return append(d.plugins.Capabilities(), rpc.CapContainerHost, rpc.CapContainerRoutes, rpc.CapContainerAliases, rpc.CapContainerRedirects,
		rpc.CapContainerSocketActivation, rpc.CapContainerUpstreamProtocol,
		rpc.CapContainerTLSOnDemand)
}

func (d *Daemon) local() (string, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rec.ID, d.rec.Name
}

// rpcKey is this Machine's published rpc_key, empty without an identity.
func (d *Daemon) rpcKey() string {
	if d.identity == nil {
		return ""
	}
	return d.identity.PublicKey()
}

// dialPeer calls a peer on the mesh as this Machine: from its management
// address, presenting its RPC identity.
func (d *Daemon) dialPeer(ctx context.Context, p rpc.Peer) (*rpc.Client, error) {
	k, err := d.publicKey()
	if err != nil {
		return nil, err
	}
	return rpc.MeshDialer{Identity: d.identity, Source: meshaddr.ManagementIP(k)}.Dial(ctx, p)
}

func (d *Daemon) record() machine.Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rec
}

// setRecord persists r, then makes it current.
func (d *Daemon) setRecord(r machine.Record) error {
	if err := machine.Save(d.recordPath(), r); err != nil {
		return fmt.Errorf("save machine record: %w", err)
	}
	d.mu.Lock()
	if (d.rec.Phase != r.Phase || !maps.Equal(d.rec.Labels, r.Labels)) && d.recordChanged != nil {
		close(d.recordChanged)
		d.recordChanged = make(chan struct{})
	}
	d.rec = r
	d.mu.Unlock()
	return nil
}

// recordChange returns a channel closed at the record's next change of
// phase or labels.
func (d *Daemon) recordChange() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.recordChanged == nil {
		d.recordChanged = make(chan struct{})
	}
	return d.recordChanged
}

func (d *Daemon) storeClient() (*store.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active == nil || d.active.store == nil {
		return nil, rpc.Errorf(rpc.CodeFailedPrecond, "this Machine is %s: it has no store yet (`ployz machine init` or `machine add` it)", d.rec.Phase)
	}
	return d.active.store, nil
}

func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// Bound inside a private directory, given its mode, then renamed into
	// place: there is no moment at which another user could connect.
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".sock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	l, err := net.Listen("unix", filepath.Join(tmp, "s"))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	err = os.Chmod(filepath.Join(tmp, "s"), 0o600)
	if err == nil {
		err = shareSocket(filepath.Join(tmp, "s"), SocketGroup)
	}
	if err == nil {
		err = os.Rename(filepath.Join(tmp, "s"), path)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return l, nil
}

// SocketGroup is the group that, when it exists, may use the RPC socket (mode 0660): the
// socket is the operator's full control of the Machine, so membership is
// equivalent to root. Without the group the socket is root-only (0600).
const SocketGroup = "ployz"

func shareSocket(path, group string) error {
	g, err := user.LookupGroup(group)
	if err != nil {
		return nil // no such group: stay root-only
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return nil
	}
	if err := os.Chown(path, -1, gid); err != nil {
		return fmt.Errorf("socket %s: group %s: %w", path, group, err)
	}
	return os.Chmod(path, 0o660)
}

// wait polls cond every interval until it holds or ctx ends.
func wait(ctx context.Context, interval time.Duration, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return nil
}
