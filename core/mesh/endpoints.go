package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/ployz/ployz/core/machine"
)

// endpointFile is the on-disk shape of the endpoint memory. Unknown fields are
// ignored on read so a newer daemon's file never breaks an older one.
type endpointFile struct {
	Version int                       `json:"version"`
	Peers   map[string]netip.AddrPort `json:"peers"`
}

// EndpointMemory is the locally remembered endpoint per peer (keyed by the
// peer's base64 public key): the last endpoint a handshake arrived on.
type EndpointMemory map[string]netip.AddrPort

// LoadEndpointMemory reads the endpoint memory at path; a missing file is an
// empty memory, because a first boot has nothing to remember.
func LoadEndpointMemory(path string) (EndpointMemory, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return EndpointMemory{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("endpoint memory %s: %w", path, err)
	}
	var f endpointFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("endpoint memory %s: %w", path, err)
	}
	if f.Peers == nil {
		f.Peers = map[string]netip.AddrPort{}
	}
	return EndpointMemory(f.Peers), nil
}

// Save writes the memory to path atomically (mode 0600).
func (m EndpointMemory) Save(path string) error {
	b, err := json.MarshalIndent(endpointFile{Version: 1, Peers: m}, "", "  ")
	if err != nil {
		return fmt.Errorf("endpoint memory %s: %w", path, err)
	}
	if err := machine.WriteFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("endpoint memory %s: %w", path, err)
	}
	return nil
}

// orderCandidates puts the remembered endpoint first (when it is still one of
// the advertised candidates) and keeps the advertised order otherwise.
func orderCandidates(candidates []netip.AddrPort, remembered netip.AddrPort) []netip.AddrPort {
	out := slices.Clone(candidates)
	if i := slices.Index(out, remembered); i > 0 {
		out = slices.Delete(out, i, i+1)
		out = slices.Insert(out, 0, remembered)
	}
	return out
}

// tracker is the rotation state of one peer. It is a plain value so the
// rotation rule can be tested without a device.
type tracker struct {
	candidates []netip.AddrPort
	idx        int       // index of the endpoint currently configured
	switchedAt time.Time // when idx was configured
}

// current is the endpoint the tracker wants configured, or the zero value
// when the peer advertised none (it can still reach us and roam).
func (t *tracker) current() netip.AddrPort {
	if len(t.candidates) == 0 {
		return netip.AddrPort{}
	}
	return t.candidates[t.idx]
}

// step applies the rotation rule at now, given the peer's last handshake. It
// returns true when the tracker moved to another endpoint: there is more than
// one candidate, and no handshake arrived since the current endpoint was
// configured within timeout, or the last one is older than stale (the peer
// went away on an endpoint that used to work).
func (t *tracker) step(now, lastHandshake time.Time, timeout, stale time.Duration) bool {
	if len(t.candidates) < 2 {
		return false
	}
	if lastHandshake.After(t.switchedAt) {
		if now.Sub(lastHandshake) < stale {
			return false
		}
		// Stale: give the current endpoint a full timeout from now before
		// counting it dead, measured from the moment it went stale.
		if now.Sub(lastHandshake) < stale+timeout {
			return false
		}
	} else if now.Sub(t.switchedAt) < timeout {
		return false
	}
	t.idx = (t.idx + 1) % len(t.candidates)
	t.switchedAt = now
	return true
}
