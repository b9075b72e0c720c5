package mesh

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/hashicorp/go-hclog"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"
)

// uapiDir is where wireguard-go and wgctrl look for userspace devices.
const uapiDir = "/var/run/wireguard"

// userspace is a wireguard-go device running inside this process.
type userspace struct {
	dev  *device.Device
	tun  tun.Device
	uapi net.Listener
	sock string
}

// uapiAlive reports whether some process still serves the interface's UAPI
// socket, in which case the interface is not ours to delete.
func uapiAlive(name string) bool {
	c, err := net.Dial("unix", filepath.Join(uapiDir, name+".sock"))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// waitUAPI waits until some process serves the interface's UAPI socket.
func waitUAPI(ctx context.Context, name string) error {
	deadline := time.Now().Add(15 * time.Second)
	for !uapiAlive(name) {
		if time.Now().After(deadline) {
			return fmt.Errorf("interface %s: no process serves %s (is ployz-wireguard.service running?)", name, filepath.Join(uapiDir, name+".sock"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// ServeDevice runs a wireguard-go device for cfg.Interface in this process
// until ctx ends or the interface is deleted: the body of `ployzd
// wireguard`, so the mesh survives daemon restarts. The daemon configures
// it through the UAPI socket (Config.External).
//
// Under systemd the TUN goes into the unit's fd store, so a restart of the
// unit (an upgrade swapping the binary, a crash) keeps the interface with
// its addresses and routes; the ending process writes its peers to
// cfg.StateFile and its successor, handed the same TUN, starts with them.
// The daemon restores anything still missing (Mesh.Run).
func ServeDevice(ctx context.Context, cfg Config) error {
	if !cfg.Subnet.IsValid() {
		// The device carries no address of its own; the daemon adds them.
		cfg.Subnet = netip.MustParsePrefix("10.210.0.0/24")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	log := cfg.Logger.Named("mesh")
	if uapiAlive(cfg.Interface) {
		return fmt.Errorf("interface %s: already run by another process (UAPI socket answers)", cfg.Interface)
	}
	kept := keptTUN()
	if kept == nil {
		if nl, err := netlink.NewHandle(); err == nil {
			l, err := nl.LinkByName(cfg.Interface)
			if err == nil && l.Type() == "wireguard" {
				// The kernel serves the mesh (ployzd chose it): never
				// replace that interface with a userspace one.
				nl.Close()
				log.Info("the kernel serves this interface; nothing to run", "interface", cfg.Interface)
				return nil
			}
			if err == nil {
				nl.LinkDel(l) // a leftover without an owner
			}
			nl.Close()
		}
	}
	u, err := startUserspace(cfg.Interface, cfg, log, kept)
	if err != nil {
		return err
	}
	defer u.close()
	u.carryOver(cfg.StateFile, kept != nil, log)
	log.Info("serving wireguard-go", "interface", cfg.Interface, "port", cfg.ListenPort, "kept_tun", kept != nil)
	select {
	case <-ctx.Done():
		u.saveState(cfg.StateFile, log)
	case <-u.dev.Wait():
	}
	return nil
}

// startUserspace creates the TUN device and wireguard-go on it, sets key and
// port directly (so the UDP sockets open in the caller's network namespace,
// not in whatever thread later serves UAPI) and serves the UAPI socket.
// A TUN kept by systemd (kept, may be nil) is used instead of a new one.
func startUserspace(name string, cfg Config, log hclog.Logger, kept *os.File) (*userspace, error) {
	var td tun.Device
	var err error
	if kept != nil {
		td, err = tun.CreateTUNFromFile(kept, cfg.MTU)
	} else {
		td, err = tun.CreateTUN(name, cfg.MTU)
	}
	if err != nil {
		return nil, fmt.Errorf("interface %s: create tun: %w", name, err)
	}
	wlog := log.Named("wireguard-go")
	dev := device.NewDevice(td, conn.NewDefaultBind(), &device.Logger{
		Verbosef: func(f string, a ...any) { wlog.Trace(fmt.Sprintf(f, a...)) },
		// wireguard-go reports routine failures (an unreachable candidate
		// endpoint) as errors; rotation handles those, so keep them at debug.
		Errorf: func(f string, a ...any) { wlog.Debug(fmt.Sprintf(f, a...)) },
	})
	k := cfg.PrivateKey
	set := fmt.Sprintf("private_key=%s\nlisten_port=%d\n", hex.EncodeToString(k[:]), cfg.ListenPort)
	if err := dev.IpcSet(set); err != nil {
		dev.Close()
		return nil, fmt.Errorf("interface %s: set key and port %d: %w", name, cfg.ListenPort, err)
	}
	if err := dev.Up(); err != nil {
		dev.Close()
		return nil, fmt.Errorf("interface %s: start wireguard-go: %w", name, err)
	}
	f, err := ipc.UAPIOpen(name)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("interface %s: open UAPI socket: %w", name, err)
	}
	l, err := ipc.UAPIListen(name, f)
	f.Close()
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("interface %s: listen on UAPI socket: %w", name, err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go dev.IpcHandle(c)
		}
	}()
	return &userspace{dev: dev, tun: td, uapi: l, sock: filepath.Join(uapiDir, name+".sock")}, nil
}

// close stops wireguard-go; closing the TUN removes the interface.
func (u *userspace) close() {
	u.uapi.Close()
	u.dev.Close()
	os.Remove(u.sock)
}
