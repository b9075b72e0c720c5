package mesh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Run checks handshakes every PollInterval until ctx ends: a peer whose
// current endpoint got no handshake within HandshakeTimeout (or whose last
// handshake is older than StaleAfter) moves to its next candidate, and the
// endpoint a handshake arrived on is remembered in EndpointStatePath. It
// returns nil when ctx ends and an error once the Mesh is closed.
func (m *Mesh) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			err := m.checkEndpoints(time.Now())
			if errors.Is(err, errClosed) {
				return err
			}
			if err != nil {
				m.log.Warn("endpoint check failed", "error", err)
			}
		}
	}
}

// checkEndpoints runs one rotation round.
func (m *Mesh) checkEndpoints(now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkOpen(); err != nil {
		return err
	}
	dev, err := m.wg.Device(m.cfg.Interface)
	if err != nil {
		return fmt.Errorf("interface %s: read device: %w", m.cfg.Interface, err)
	}
	if why := m.deviceLost(dev); why != "" {
		return m.restoreLocked(dev, why)
	}
	var remove, cfg wgtypes.Config
	var poke []netip.Addr
	memoryChanged := false
	for _, p := range dev.Peers {
		st, ok := m.peers[p.PublicKey]
		if !ok {
			continue
		}
		key := p.PublicKey.String()
		ep := udpAddrPort(p.Endpoint)
		if p.LastHandshakeTime.After(st.tr.switchedAt) && ep.IsValid() {
			// WireGuard may have roamed to another candidate the peer used to
			// reach us; follow it so rotation does not fight the roam.
			for i, c := range st.tr.candidates {
				if c == ep {
					st.tr.idx = i
					if m.memory[key] != ep {
						m.memory[key] = ep
						memoryChanged = true
						m.log.Info("endpoint established", "peer", key, "endpoint", ep)
					}
				}
			}
		}
		if st.tr.step(now, p.LastHandshakeTime, m.cfg.HandshakeTimeout, m.cfg.StaleAfter) {
			next := st.tr.current()
			m.log.Info("no handshake, rotating endpoint", "peer", key, "from", ep, "to", next)
			// Re-create the peer rather than only moving its endpoint:
			// WireGuard rate-limits handshake initiations to one per 5 s per
			// peer, so a plain move would wait for the next retry. A fresh
			// peer lets the poke start a handshake to the new endpoint now.
			// Nothing is lost: a rotating peer has had no handshake for at
			// least the timeout, or for longer than a session lives.
			remove.Peers = append(remove.Peers, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true})
			pc := peerConfig(st.peer)
			pc.Endpoint = net.UDPAddrFromAddrPort(next)
			cfg.Peers = append(cfg.Peers, pc)
			poke = append(poke, st.peer.ManagementIP)
		}
	}
	if len(cfg.Peers) > 0 {
		if err := m.wg.ConfigureDevice(m.cfg.Interface, remove); err != nil {
			return fmt.Errorf("interface %s: remove rotating peers: %w", m.cfg.Interface, err)
		}
		if err := m.wg.ConfigureDevice(m.cfg.Interface, cfg); err != nil {
			return fmt.Errorf("interface %s: re-add rotating peers: %w", m.cfg.Interface, err)
		}
	}
	if memoryChanged && m.cfg.EndpointStatePath != "" {
		if err := m.memory.Save(m.cfg.EndpointStatePath); err != nil {
			return err // already names the file
		}
	}
	for _, a := range poke {
		m.poke(a)
	}
	return nil
}

// udpAddrPort converts wgctrl's endpoint; nil gives the zero value.
func udpAddrPort(a *net.UDPAddr) netip.AddrPort {
	if a == nil {
		return netip.AddrPort{}
	}
	ap := a.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
