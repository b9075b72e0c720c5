package mesh

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// deviceLost says why the interface no longer holds what this Mesh
// configured ("" when it does). Only a device served by another process
// can lose it behind the daemon's back: ployz-wireguard.service restarted
// (an upgrade, a crash) without the state it hands to its successor, or
// its TUN was not kept and the link is a new one without addresses or
// routes. Callers hold m.mu.
func (m *Mesh) deviceLost(dev *wgtypes.Device) string {
	if !m.cfg.External {
		return ""
	}
	switch {
	case dev.PrivateKey != m.cfg.PrivateKey || dev.ListenPort != m.cfg.ListenPort:
		return "key or port missing"
	case len(dev.Peers) < len(m.peers):
		return fmt.Sprintf("%d of %d peers", len(dev.Peers), len(m.peers))
	}
	if l, err := m.nl.LinkByName(m.cfg.Interface); err == nil && l.Attrs().Index != m.index {
		return "link recreated"
	}
	return ""
}

// restoreLocked puts the whole configuration back on dev: key and port
// where it lacks them (keyAndPort), every peer at its current endpoint,
// then the link's addresses and the routes, and pokes each peer so
// handshakes start now. Callers hold m.mu.
func (m *Mesh) restoreLocked(dev *wgtypes.Device, why string) error {
	cfg := m.keyAndPort(dev)
	cfg.ReplacePeers = true
	poke := make([]netip.Addr, 0, len(m.peers))
	for _, st := range m.peers {
		pc := peerConfig(st.peer)
		if ep := st.tr.current(); ep.IsValid() {
			pc.Endpoint = net.UDPAddrFromAddrPort(ep)
		}
		cfg.Peers = append(cfg.Peers, pc)
		poke = append(poke, st.peer.ManagementIP)
	}
	if err := m.wg.ConfigureDevice(m.cfg.Interface, cfg); err != nil {
		return fmt.Errorf("interface %s: restore %d peers: %w", m.cfg.Interface, len(cfg.Peers), err)
	}
	if err := m.configureLink(); err != nil {
		return err
	}
	if err := m.syncRoutes(); err != nil {
		return err
	}
	for _, a := range poke {
		m.poke(a)
	}
	m.log.Warn("wireguard device lost its configuration; restored", "interface", m.cfg.Interface, "why", why, "peers", len(m.peers))
	return nil
}

// Device is what a look at the interface from outside the daemon shows:
// enough to tell whether a restart of its process kept the mesh whole.
type Device struct {
	Index     int         // the link's index: the same link when the TUN was kept
	PublicKey wgtypes.Key // zero when the device has no key yet
	Peers     int
	Addresses int // global addresses on the link (gateway and management)
}

// ReadDevice reads the interface name through its UAPI socket or the
// kernel, and its link.
func ReadDevice(name string) (Device, error) {
	c, err := wgctrl.New()
	if err != nil {
		return Device{}, fmt.Errorf("wgctrl: %w", err)
	}
	defer c.Close()
	dev, err := c.Device(name)
	if err != nil {
		return Device{}, fmt.Errorf("interface %s: read device: %w", name, err)
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return Device{}, fmt.Errorf("interface %s: %w", name, err)
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return Device{}, fmt.Errorf("interface %s: list addresses: %w", name, err)
	}
	d := Device{Index: l.Attrs().Index, PublicKey: dev.PublicKey, Peers: len(dev.Peers)}
	for _, a := range addrs {
		if !ipNetPrefix(a.IPNet).Addr().IsLinkLocalUnicast() {
			d.Addresses++
		}
	}
	return d, nil
}

// Whole says what after still lacks of before ("" when nothing): the same
// key, at least as many peers and addresses. A new link is allowed (the
// daemon restores it), so the index is not compared.
func (before Device) Whole(after Device) string {
	switch {
	case after.PublicKey != before.PublicKey:
		return "key missing"
	case after.Peers < before.Peers:
		return fmt.Sprintf("%d of %d peers", after.Peers, before.Peers)
	case after.Addresses < before.Addresses:
		return fmt.Sprintf("%d of %d addresses", after.Addresses, before.Addresses)
	}
	return ""
}
