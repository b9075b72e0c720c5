package mesh

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Status is the interface as this Machine sees it right now.
type Status struct {
	Interface    string       // interface name
	Kind         Kind         // kernel or userspace
	PublicKey    wgtypes.Key  // as the device reports it
	ListenPort   int          // as the device reports it
	Subnet       netip.Prefix // this Machine's /24
	Gateway      netip.Addr   // the subnet's .1
	ManagementIP netip.Addr   // fdcc:: + key bytes
	Peers        []PeerStatus // sorted by public key
}

// PeerStatus is one peer's live WireGuard state plus its candidates.
type PeerStatus struct {
	PublicKey    wgtypes.Key
	Subnet       netip.Prefix // zero for a peer not set through SetPeers
	ManagementIP netip.Addr
	// Endpoint is the one WireGuard currently sends to.
	Endpoint netip.AddrPort
	// Candidates in trial order (remembered endpoint first).
	Candidates []netip.AddrPort
	// LastHandshake is zero when no handshake ever completed.
	LastHandshake time.Time
	RxBytes       int64 // bytes received from the peer
	TxBytes       int64 // bytes sent to the peer
}

// Status reads the device and reports every configured peer, sorted by key.
func (m *Mesh) Status() (Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkOpen(); err != nil {
		return Status{}, err
	}
	dev, err := m.wg.Device(m.cfg.Interface)
	if err != nil {
		return Status{}, fmt.Errorf("interface %s: read device: %w", m.cfg.Interface, err)
	}
	s := Status{Interface: m.cfg.Interface, Kind: m.kind, PublicKey: dev.PublicKey, ListenPort: dev.ListenPort,
		Subnet: m.cfg.Subnet, Gateway: m.gw, ManagementIP: m.mgmt}
	for _, p := range dev.Peers {
		ps := PeerStatus{PublicKey: p.PublicKey, Endpoint: udpAddrPort(p.Endpoint),
			LastHandshake: p.LastHandshakeTime, RxBytes: p.ReceiveBytes, TxBytes: p.TransmitBytes}
		if p.LastHandshakeTime.Unix() <= 0 {
			ps.LastHandshake = time.Time{}
		}
		if st, ok := m.peers[p.PublicKey]; ok {
			ps.Subnet, ps.ManagementIP = st.peer.Subnet, st.peer.ManagementIP
			ps.Candidates = slices.Clone(st.tr.candidates)
		}
		s.Peers = append(s.Peers, ps)
	}
	slices.SortFunc(s.Peers, func(a, b PeerStatus) int { return slices.Compare(a.PublicKey[:], b.PublicKey[:]) })
	return s, nil
}
