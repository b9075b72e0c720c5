package daemon

import (
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/core/mesh"
)

// departedGrace is how long a Machine whose row vanished stays a
// WireGuard peer. Any member can delete another Machine's row; without
// the grace every Machine would drop the victim as a peer at once, and
// the row the victim writes again (it notices its own row is gone) could
// then never reach them: cut off for good. A Machine really forgotten is
// dropped once the grace ends.
const departedGrace = 60 * time.Second

// departedPeers remembers the WireGuard peers the machines rows gave,
// and keeps one for departedGrace after its row is gone.
type departedPeers struct {
	mu    sync.Mutex
	grace time.Duration
	now   func() time.Time
	seen  map[wgtypes.Key]seenPeer
}

type seenPeer struct {
	peer mesh.Peer
	last time.Time
}

func newDepartedPeers() *departedPeers {
	return &departedPeers{grace: departedGrace, now: time.Now, seen: map[wgtypes.Key]seenPeer{}}
}

// merge returns current plus every peer seen within the grace that
// current lacks, and when the earliest of those expires (zero if none).
// A departed peer whose subnet a current peer now holds is dropped at
// once: two peers must never claim the same addresses.
func (dp *departedPeers) merge(current []mesh.Peer) ([]mesh.Peer, time.Time) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	now := dp.now()
	in := map[wgtypes.Key]bool{}
	taken := map[string]bool{}
	for _, p := range current {
		in[p.PublicKey] = true
		taken[p.Subnet.String()] = true
		dp.seen[p.PublicKey] = seenPeer{peer: p, last: now}
	}
	out := append([]mesh.Peer(nil), current...)
	var next time.Time
	for k, s := range dp.seen {
		if in[k] {
			continue
		}
		ends := s.last.Add(dp.grace)
		if !now.Before(ends) || taken[s.peer.Subnet.String()] {
			delete(dp.seen, k)
			continue
		}
		out = append(out, s.peer)
		if next.IsZero() || ends.Before(next) {
			next = ends
		}
	}
	return out, next
}
