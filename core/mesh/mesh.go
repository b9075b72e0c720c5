package mesh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Kind names the WireGuard implementation behind the interface.
type Kind string

// The two implementations Up can pick.
const (
	KindKernel    Kind = "kernel"
	KindUserspace Kind = "userspace"
)

// Mesh is this Machine's configured WireGuard interface and its peers.
type Mesh struct {
	cfg  Config
	log  hclog.Logger
	kind Kind
	gw   netip.Addr
	mgmt netip.Addr

	wg *wgctrl.Client
	// nl is bound to the network namespace Up ran in, so later calls from any
	// goroutine touch the same namespace as the interface.
	nl    *netlink.Handle
	index int
	user  *userspace // nil on the kernel path

	mu     sync.Mutex
	peers  map[wgtypes.Key]*peerState
	memory EndpointMemory
}

// peerState is a desired peer plus its rotation state.
type peerState struct {
	peer Peer
	tr   tracker
}

// Up creates or adopts the WireGuard interface and configures key, port,
// MTU and this Machine's addresses: the subnet's .1 as a /32 and the
// management address as a /128. It is idempotent: a kernel interface left by
// an earlier daemon is adopted and reconfigured; a leftover link whose owner
// is gone is deleted and recreated. Peers start empty until SetPeers.
func Up(ctx context.Context, cfg Config) (*Mesh, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Mesh{
		cfg:   cfg,
		log:   cfg.Logger.Named("mesh"),
		mgmt:  meshaddr.ManagementIP(cfg.PrivateKey.PublicKey()),
		peers: map[wgtypes.Key]*peerState{},
	}
	m.gw, _ = meshaddr.Gateway(cfg.Subnet)
	if cfg.EndpointStatePath != "" {
		if m.memory, err = LoadEndpointMemory(cfg.EndpointStatePath); err != nil {
			m.log.Warn("ignoring unreadable endpoint memory", "error", err)
		}
	}
	if m.memory == nil {
		m.memory = EndpointMemory{}
	}
	if m.nl, err = netlink.NewHandle(); err != nil {
		return nil, fmt.Errorf("netlink handle: %w", err)
	}
	if err := m.createDevice(ctx); err != nil {
		if m.user != nil {
			m.user.close() // ours, half set up; a kernel link is left as found
		}
		m.closeLocked()
		return nil, err
	}
	if err := m.configureLink(); err != nil {
		if m.cfg.External {
			m.Close() // the device belongs to its own process: leave it
		} else {
			m.Down()
		}
		return nil, err
	}
	m.log.Info("mesh up", "interface", cfg.Interface, "kind", m.kind, "port", cfg.ListenPort,
		"gateway", m.gw, "management", m.mgmt)
	return m, nil
}

// createDevice adopts or creates the link and opens the wgctrl client.
func (m *Mesh) createDevice(ctx context.Context) error {
	name := m.cfg.Interface
	if m.cfg.External {
		if err := waitUAPI(ctx, name); err != nil {
			return err
		}
		m.log.Info("adopting wireguard-go served by another process", "interface", name)
		m.kind = KindUserspace
	} else if l, err := m.nl.LinkByName(name); err == nil {
		switch {
		case l.Type() == "wireguard" && !m.cfg.Userspace:
			m.log.Info("adopting existing kernel interface", "interface", name)
			m.kind = KindKernel
		case uapiAlive(name):
			return fmt.Errorf("interface %s: already run by another process (UAPI socket answers)", name)
		default:
			// A leftover with no live owner: remove it so Up starts clean.
			m.log.Info("removing stale interface", "interface", name, "type", l.Type())
			if err := m.nl.LinkDel(l); err != nil {
				return fmt.Errorf("interface %s: delete stale link: %w", name, err)
			}
		}
	}
	if m.kind == "" && !m.cfg.Userspace {
		err := m.nl.LinkAdd(&netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: m.cfg.MTU}})
		if err == nil {
			m.kind = KindKernel
		} else {
			m.log.Info("kernel WireGuard unavailable, using wireguard-go", "error", err)
		}
	}
	if m.kind == "" {
		u, err := startUserspace(name, m.cfg, m.log, nil)
		if err != nil {
			return err
		}
		m.user, m.kind = u, KindUserspace
	}
	var err error
	if m.wg, err = wgctrl.New(); err != nil {
		return fmt.Errorf("interface %s: wgctrl: %w", name, err)
	}
	if m.kind == KindKernel || m.cfg.External {
		dev, err := m.wg.Device(name)
		if err != nil {
			dev = nil // set both
		}
		if cfg := m.keyAndPort(dev); cfg.PrivateKey != nil || cfg.ListenPort != nil {
			if err := m.wg.ConfigureDevice(name, cfg); err != nil {
				return fmt.Errorf("interface %s: set key and port: %w", name, err)
			}
		}
	}
	return ctx.Err()
}

// keyAndPort sets the device's key and port where dev (nil: not read)
// lacks them, and nothing it already has: wireguard-go rebinds its UDP
// socket on every listen_port it is given, dropping the datagrams in
// flight. A handshake response lost that way leaves the peer without a
// session until WireGuard retries 5 s later; adopting the device at every
// ployzd start, during an upgrade right as ployz-wireguard.service's new
// process handshakes, did that.
func (m *Mesh) keyAndPort(dev *wgtypes.Device) wgtypes.Config {
	var cfg wgtypes.Config
	if dev == nil || dev.PrivateKey != m.cfg.PrivateKey {
		cfg.PrivateKey = &m.cfg.PrivateKey
	}
	if port := m.cfg.ListenPort; dev == nil || dev.ListenPort != port {
		cfg.ListenPort = &port
	}
	return cfg
}

// configureLink sets MTU, addresses and up state, dropping addresses a
// previous configuration (another subnet or key) left on an adopted link.
func (m *Mesh) configureLink() error {
	name := m.cfg.Interface
	l, err := m.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("interface %s: %w", name, err)
	}
	m.index = l.Attrs().Index
	if err := m.nl.LinkSetMTU(l, m.cfg.MTU); err != nil {
		return fmt.Errorf("interface %s: set mtu %d: %w", name, m.cfg.MTU, err)
	}
	// The management address is IPv6; make sure IPv6 is on for this link
	// (a host may disable it by default). Read first: /proc/sys can be
	// read-only where it is already right.
	v6 := "/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6"
	if b, err := os.ReadFile(v6); err == nil && strings.TrimSpace(string(b)) != "0" {
		if err := os.WriteFile(v6, []byte("0\n"), 0o644); err != nil {
			return fmt.Errorf("interface %s: enable IPv6: %w", name, err)
		}
	}
	want := []netip.Prefix{netip.PrefixFrom(m.gw, 32), netip.PrefixFrom(m.mgmt, 128)}
	have, err := m.nl.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("interface %s: list addresses: %w", name, err)
	}
	for _, a := range have {
		p := ipNetPrefix(a.IPNet)
		if p.Addr().IsLinkLocalUnicast() || containsPrefix(want, p) {
			continue
		}
		if err := m.nl.AddrDel(l, &a); err != nil {
			return fmt.Errorf("interface %s: remove stale address %s: %w", name, p, err)
		}
	}
	for _, p := range want {
		a := &netlink.Addr{IPNet: prefixIPNet(p), Flags: unix.IFA_F_NODAD}
		if err := m.nl.AddrReplace(l, a); err != nil {
			return fmt.Errorf("interface %s: add address %s: %w", name, p, err)
		}
	}
	if err := m.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("interface %s: set up: %w", name, err)
	}
	return nil
}

// Kind reports whether the kernel or wireguard-go runs the interface.
func (m *Mesh) Kind() Kind { return m.kind }

// PublicKey is this Machine's WireGuard public key.
func (m *Mesh) PublicKey() wgtypes.Key { return m.cfg.PrivateKey.PublicKey() }

// ManagementIP is this Machine's management IPv6 address.
func (m *Mesh) ManagementIP() netip.Addr { return m.mgmt }

// Gateway is this Machine's subnet .1, carried on the interface as a /32.
func (m *Mesh) Gateway() netip.Addr { return m.gw }

// Close releases this process's handles but leaves the interface running: a
// kernel interface persists, a userspace one keeps serving until the process
// exits. Use Down to remove the interface.
func (m *Mesh) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closeLocked()
}

// closeLocked releases the handles; callers hold m.mu.
func (m *Mesh) closeLocked() error {
	var errs []error
	if m.wg != nil {
		errs = append(errs, m.wg.Close())
		m.wg = nil
	}
	if m.nl != nil {
		m.nl.Close()
		m.nl = nil
	}
	return errors.Join(errs...)
}

// Down removes the interface (its addresses and routes go with it) and
// releases the handles.
func (m *Mesh) Down() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	if m.user != nil {
		m.user.close()
		m.user = nil
	} else if m.nl != nil {
		if l, err := m.nl.LinkByName(m.cfg.Interface); err == nil {
			if err := m.nl.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("interface %s: delete: %w", m.cfg.Interface, err))
			}
		}
	}
	errs = append(errs, m.closeLocked())
	return errors.Join(errs...)
}

// errClosed is returned by calls made after Close or Down.
var errClosed = errors.New("mesh: closed")

// checkOpen fails once the handles are released; callers hold m.mu.
func (m *Mesh) checkOpen() error {
	if m.wg == nil || m.nl == nil {
		return fmt.Errorf("interface %s: %w", m.cfg.Interface, errClosed)
	}
	return nil
}

// prefixIPNet converts for the netlink API, which still speaks net.IPNet.
func prefixIPNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)}
}

// ipNetPrefix converts back; a nil or malformed IPNet gives the zero prefix.
func ipNetPrefix(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.Prefix{}
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}

func containsPrefix(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
