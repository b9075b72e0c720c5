package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/meshaddr"
	sdkstore "github.com/ployz/ployz/sdk/store"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/mesh"
	"github.com/ployz/ployz/core/mesh/dockernet"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/fdstore"
)

// Units the daemon starts and never stops outside a reset.
const (
	StoreUnit = "ployz-store.service"
	// StoreEnvFile holds the store unit's Machine-specific arguments.
	StoreEnvFile  = "/etc/ployz/store.env"
	WireGuardUnit = feature.WireGuardUnit
)

func (d *Daemon) keyPath() string { return filepath.Join(d.cfg.DataDir, "wireguard.key") }

// publicKey returns this Machine's WireGuard public key, creating the
// private key on first use.
func (d *Daemon) publicKey() (wgtypes.Key, error) {
	k, err := mesh.LoadOrCreateKey(d.keyPath())
	if err != nil {
		return wgtypes.Key{}, err
	}
	return k.PublicKey(), nil
}

// kernelWireGuard reports whether the mesh runs on kernel WireGuard: the
// module is there and the daemon is not told to use wireguard-go.
func (d *Daemon) kernelWireGuard() bool {
	return !d.cfg.UserspaceWireGuard && mesh.KernelAvailable(mesh.DefaultInterface)
}

// activate starts what a joining or participating Machine runs: the mesh,
// the ployz Docker network, the store unit and the loops that keep peers
// and this Machine's rows current. It is idempotent across restarts.
func (d *Daemon) activate(ctx context.Context) error {
	rec := d.record()
	key, err := mesh.LoadOrCreateKey(d.keyPath())
	if err != nil {
		return err
	}
	// A kernel interface outlives ployzd by itself; without the module the
	// userspace device runs under its own unit for the same reason.
	external := !d.kernelWireGuard()
	if external {
		if err := d.cfg.Units.Start(ctx, WireGuardUnit); err != nil {
			return fmt.Errorf("mesh: %w", err)
		}
	}
	m, err := mesh.Up(ctx, mesh.Config{
		External:          external,
		PrivateKey:        key,
		Subnet:            rec.Subnet,
		ListenPort:        d.cfg.WireGuardPort,
		EndpointStatePath: filepath.Join(d.cfg.DataDir, "endpoints.json"),
		Logger:            d.log.Named("mesh"),
	})
	if err != nil {
		return fmt.Errorf("mesh: %w", err)
	}
	started := false
	defer func() {
		if !started {
			m.Close() // a retry adopts the device again
		}
	}()
	if len(rec.JoinPeers) > 0 {
		if err := m.SetPeers(meshPeers(rec.JoinPeers)); err != nil {
			d.log.Warn("join peers", "error", err)
		}
	}
	// Only the mesh reaches Machine RPC, gossip and the metrics endpoint;
	// only the bridge and the mesh reach the Internal DNS
	// (docs/security.md).
	if err := dockernet.EnsureInput(dockernet.Config{Subnet: rec.Subnet, ChainPrefix: inputChainPrefix, Logger: d.log},
		dockernet.Input{MeshTCP: []int{d.cfg.RPCPort, d.cfg.VolumePort, GossipPort, MetricsPort}, MeshUDP: []int{GossipPort}, DNS: 53}); err != nil {
		return fmt.Errorf("input filter: %w", err)
	}
	if cli, err := dockernet.NewClient(); err != nil {
		d.log.Error("docker", "error", err)
	} else {
		ncfg := dockernet.Config{Subnet: rec.Subnet, ClusterNetwork: clusterNetwork(rec), ChainPrefix: inputChainPrefix, Logger: d.log.Named("dockernet")}
		if _, err := dockernet.EnsureNetwork(ctx, cli, ncfg); err != nil {
			d.log.Error("docker network ployz", "error", err)
		} else if err := dockernet.EnsureForwarding(ncfg); err != nil {
			// Where dockerd turned IP forwarding on itself it set FORWARD's
			// policy to DROP: without these rules no Container on another
			// Machine reaches ours (a server or VM; a container Machine
			// inherits forwarding, so the lab never showed it).
			d.log.Error("forwarding between the mesh and the ployz network", "error", err)
		} else {
			d.startIsolation(ncfg)
		}
		cli.Close()
	}

	st, err := d.startStore(ctx, m.ManagementIP(), rec)
	if err != nil {
		return err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &active{cancel: cancel, done: make(chan struct{}), mesh: m, store: st}
	// Machine RPC over the mesh, on the management address. Both ports
	// stay in the fd store across restarts of ployzd, so no local user can
	// take one in between (meshListen).
	lis, err := meshListen(RPCFDName, m.ManagementIP(), d.cfg.RPCPort)
	if err != nil {
		cancel()
		return fmt.Errorf("machine rpc on the mesh: %w", err)
	}
	if d.identity == nil {
		lis.Close()
		cancel()
		return fmt.Errorf("machine rpc on the mesh: no RPC identity")
	}
	// The volume transport: a source Machine's send_volume_to streams
	// into receive_volume here, authenticated as Machine RPC is.
	vlis, err := meshListen(VolumeFDName, m.ManagementIP(), d.cfg.VolumePort)
	if err != nil {
		lis.Close()
		cancel()
		return fmt.Errorf("volume transport on the mesh: %w", err)
	}
	a.tcp = d.rpc.MeshServer(d.identity)
	go a.tcp.Serve(lis) // ends with Stop
	a.volume = d.rpc.PortServer(d.identity, fmt.Sprintf("port %d is the volume transport between Machines", d.cfg.VolumePort), rpc.CmdReceiveVolume)
	go a.volume.Serve(vlis) // ends with Stop

	d.mu.Lock()
	d.active = a
	d.mu.Unlock()
	started = true

	go func() {
		defer close(a.done)
		loops := append([]func(context.Context){
			func(ctx context.Context) { m.Run(ctx) }, // logs its own failures
			d.peerLoop, d.publishLoop, d.joinLoop, d.ctrs.ObserveLoop, d.retireLoop, d.runsLoop, d.jobFeature().Loop, d.volumes().ProtectLoop,
			d.isolationLoop,
		}, d.servingLoops()...)
		done := make(chan struct{}, len(loops))
		for _, l := range loops {
			go func() { l(runCtx); done <- struct{}{} }()
		}
		for range loops {
			<-done
		}
	}()
	return nil
}

// Names of ployzd's mesh listeners in ployz.service's fd store.
const (
	RPCFDName    = "ployz-rpc"
	VolumeFDName = "ployz-volume"
)

// meshListen listens on ip:port with the socket kept in the fd store under
// name (fdstore.ListenTCP): a restart of ployzd (an upgrade, a crash)
// never frees the port.
func meshListen(name string, ip netip.Addr, port int) (net.Listener, error) {
	l, err := fdstore.ListenTCP(name, netip.AddrPortFrom(ip, uint16(port)).String())
	if err != nil {
		return nil, err
	}
	return l, nil
}

// releaseMeshPorts takes the mesh listeners out of the fd store: after a
// reset the ports are no longer this Machine's.
func releaseMeshPorts() {
	fdstore.Forget(RPCFDName)
	fdstore.Forget(VolumeFDName)
}

// deactivate stops the loops and the mesh RPC listener. The store unit and
// the mesh device keep running (serving outlives the daemon).
func (d *Daemon) deactivate() {
	d.mu.Lock()
	a := d.active
	d.active = nil
	d.mu.Unlock()
	if a == nil {
		return
	}
	a.cancel()
	a.tcp.Stop()
	a.volume.Stop()
	<-a.done
	a.mesh.Close()
}

// startStore writes the store unit's arguments, (re)starts the unit when
// they changed, and waits until its API answers.
func (d *Daemon) startStore(ctx context.Context, mgmt netip.Addr, rec machine.Record) (*sdkstore.Client, error) {
	dir := filepath.Join(d.cfg.DataDir, "store")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// Older releases kept a long-lived API token here; nothing reads it
	// now (the socket takes none), so it goes rather than lingering.
	if err := os.Remove(filepath.Join(dir, "token")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the old store token: %w", err)
	}
	var bootstrap []string
	for _, p := range rec.JoinPeers {
		bootstrap = append(bootstrap, gossipAddr(p.PublicKey))
	}
	// ployz-store.service fixes the db path, API socket and admin socket;
	// the Machine-specific rest comes from this env file.
	secretPath := store.ClusterSecretPath(d.cfg.DataDir)
	if _, err := sdkstore.ReadClusterSecretFile(secretPath); err != nil {
		return nil, fmt.Errorf("this Machine has no usable Cluster secret (minted at init, received at join): %w", err)
	}
	args := []string{
		"--gossip-addr", netip.AddrPortFrom(mgmt, GossipPort).String(),
		"--gossip-key-file", secretPath,
	}
	if len(bootstrap) > 0 {
		args = append(args, "--bootstrap", strings.Join(bootstrap, ","))
	}
	env := "PLOYZ_STORE_ARGS=" + strings.Join(args, " ") + "\n"
	envPath := StoreEnvFile
	old, _ := os.ReadFile(envPath)
	if string(old) != env {
		if err := machine.WriteFileAtomic(envPath, []byte(env), 0o600); err != nil {
			return nil, err
		}
		// Arguments changed: replace the running store (docs/architecture.md,
		// "Serving outlives the daemon": replaced only when what it was created from changes).
		if err := d.cfg.Units.Restart(ctx, StoreUnit); err != nil {
			return nil, err
		}
	} else if err := d.cfg.Units.Start(ctx, StoreUnit); err != nil {
		return nil, err
	}
	st := sdkstore.New(d.storeSocket())
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var lastErr error
	if err := wait(wctx, 200*time.Millisecond, func() bool { _, lastErr = st.Health(wctx); return lastErr == nil }); err != nil {
		return nil, fmt.Errorf("store did not answer on %s: %v", d.storeSocket(), lastErr)
	}
	return st, nil
}

// gossipAddr is a peer's store gossip address on its management IP.
func gossipAddr(publicKey string) string {
	k, err := wgtypes.ParseKey(publicKey)
	if err != nil {
		return ""
	}
	return netip.AddrPortFrom(meshaddr.ManagementIP(k), GossipPort).String()
}

func meshPeers(ps []machine.Peer) []mesh.Peer {
	var out []mesh.Peer
	for _, p := range ps {
		k, err := wgtypes.ParseKey(p.PublicKey)
		if err != nil || !p.Subnet.IsValid() {
			continue
		}
		out = append(out, mesh.Peer{PublicKey: k, Endpoints: slices.Clone(p.Endpoints), Subnet: p.Subnet})
	}
	return out
}

// clusterNetwork is the Cluster network of rec, or the default one for a
// record from before it was kept.
var clusterNetwork = feature.ClusterNetwork
