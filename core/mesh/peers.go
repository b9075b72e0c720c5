package mesh

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/ployz/ployz/core/meshaddr"
	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// rtProto tags the routes this package installs so a resync removes only its
// own routes and never one an operator or another tool added.
const rtProto netlink.RouteProtocol = 210

// Peer is another Machine as the mesh needs it.
type Peer struct {
	// PublicKey is the peer's WireGuard public key.
	PublicKey wgtypes.Key
	// Endpoints are the peer's advertised candidates, tried in order (after
	// the remembered one) until a handshake arrives.
	Endpoints []netip.AddrPort
	// Subnet is the peer's Machine /24.
	Subnet netip.Prefix
	// ManagementIP is the peer's management address; zero means derive it
	// from PublicKey.
	ManagementIP netip.Addr
}

// SetPeers makes the interface's peers exactly peers: new ones are added,
// missing ones removed, changed ones updated. Allowed IPs are the peer's
// subnet and management /128, with a 25 s persistent keepalive; routes to
// both go via the interface. A peer whose candidate endpoints did not change
// keeps its current endpoint, so rebuilding from an unchanged table never
// interrupts a working tunnel.
func (m *Mesh) SetPeers(peers []Peer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkOpen(); err != nil {
		return err
	}
	self := m.PublicKey()
	next := map[wgtypes.Key]*peerState{}
	for i, p := range peers {
		if p.PublicKey == (wgtypes.Key{}) {
			return fmt.Errorf("peer %d: public key missing", i)
		}
		if p.PublicKey == self {
			continue // the machines table includes this Machine
		}
		if _, dup := next[p.PublicKey]; dup {
			return fmt.Errorf("peer %s: listed twice", p.PublicKey)
		}
		if _, err := meshaddr.Gateway(p.Subnet); err != nil {
			return fmt.Errorf("peer %s subnet: %w", p.PublicKey, err)
		}
		p.Subnet = p.Subnet.Masked()
		if p.Subnet.Overlaps(m.cfg.Subnet) {
			return fmt.Errorf("peer %s subnet %s: overlaps this Machine's %s", p.PublicKey, p.Subnet, m.cfg.Subnet)
		}
		if !p.ManagementIP.IsValid() {
			p.ManagementIP = meshaddr.ManagementIP(p.PublicKey)
		}
		next[p.PublicKey] = &peerState{peer: p}
	}
	dev, err := m.wg.Device(m.cfg.Interface)
	if err != nil {
		return fmt.Errorf("interface %s: read device: %w", m.cfg.Interface, err)
	}
	now := time.Now()
	var cfg wgtypes.Config
	var poke []netip.Addr
	for k, st := range next {
		pc := peerConfig(st.peer)
		if old, ok := m.peers[k]; ok && sameSet(old.peer.Endpoints, st.peer.Endpoints) {
			st.tr = old.tr
		} else {
			st.tr = tracker{candidates: orderCandidates(st.peer.Endpoints, m.memory[k.String()]), switchedAt: now}
			if ep := st.tr.current(); ep.IsValid() {
				pc.Endpoint = net.UDPAddrFromAddrPort(ep)
			}
			poke = append(poke, st.peer.ManagementIP)
		}
		cfg.Peers = append(cfg.Peers, pc)
	}
	for _, p := range dev.Peers {
		if _, ok := next[p.PublicKey]; !ok {
			cfg.Peers = append(cfg.Peers, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true})
		}
	}
	if err := m.wg.ConfigureDevice(m.cfg.Interface, cfg); err != nil {
		return fmt.Errorf("interface %s: configure %d peers: %w", m.cfg.Interface, len(next), err)
	}
	m.peers = next
	if err := m.syncRoutes(); err != nil {
		return err
	}
	for _, a := range poke {
		m.poke(a)
	}
	m.log.Debug("peers set", "count", len(next))
	return nil
}

// peerConfig is the full WireGuard configuration of a peer, without endpoint.
func peerConfig(p Peer) wgtypes.PeerConfig {
	keepalive := Keepalive
	return wgtypes.PeerConfig{
		PublicKey:                   p.PublicKey,
		ReplaceAllowedIPs:           true,
		AllowedIPs:                  []net.IPNet{*prefixIPNet(p.Subnet), *prefixIPNet(netip.PrefixFrom(p.ManagementIP, 128))},
		PersistentKeepaliveInterval: &keepalive,
	}
}

// syncRoutes installs a route per peer subnet and management address via the
// interface (sourced from this Machine's .1 and management address, so
// replies come back over the mesh) and removes its own routes for peers gone.
func (m *Mesh) syncRoutes() error {
	want := map[netip.Prefix]netip.Addr{}
	for _, st := range m.peers {
		want[st.peer.Subnet] = m.gw
		want[netip.PrefixFrom(st.peer.ManagementIP, 128)] = m.mgmt
	}
	have, err := m.nl.RouteListFiltered(netlink.FAMILY_ALL,
		&netlink.Route{LinkIndex: m.index, Protocol: rtProto}, netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("interface %s: list routes: %w", m.cfg.Interface, err)
	}
	for _, r := range have {
		if _, ok := want[ipNetPrefix(r.Dst)]; ok {
			continue
		}
		if err := m.nl.RouteDel(&r); err != nil {
			return fmt.Errorf("interface %s: remove route %s: %w", m.cfg.Interface, ipNetPrefix(r.Dst), err)
		}
	}
	for dst, src := range want {
		r := &netlink.Route{LinkIndex: m.index, Dst: prefixIPNet(dst), Src: src.AsSlice(),
			Protocol: rtProto, Scope: netlink.SCOPE_LINK}
		if err := m.nl.RouteReplace(r); err != nil {
			return fmt.Errorf("interface %s: route %s: %w", m.cfg.Interface, dst, err)
		}
	}
	return nil
}

// poke sends one datagram to a peer's management address (discard port).
// WireGuard only initiates a handshake when it has something to send, so
// this makes a new or rotated endpoint get tried now rather than at the next
// keepalive. The peer drops the datagram.
func (m *Mesh) poke(a netip.Addr) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 9)))
	if err != nil {
		m.log.Debug("poke failed", "peer", a, "error", err)
		return
	}
	c.Write([]byte{0})
	c.Close()
}

// sameSet compares endpoint lists ignoring order.
func sameSet(a, b []netip.AddrPort) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
