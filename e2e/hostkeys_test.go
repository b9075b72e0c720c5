package e2e

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// labPins pins each lab Machine's SSH host keys, read through the lab's
// own channel (Docker or the VM console), in hk's file before anything
// contacts the Machine over SSH, as `ployz lab up` does for the operator.
type labPins struct {
	lab *lab.Lab
	hk  rpc.HostKeys

	mu   sync.Mutex
	done map[string]bool
}

// pin pins the Machines not pinned yet; one whose keys cannot be read
// now (stopped) is tried again on the next call, and an SSH contact with
// it meanwhile is refused, naming its fingerprint.
func (p *labPins) pin(t testing.TB) {
	t.Helper()
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		p.done = map[string]bool{}
	}
	for _, m := range p.lab.Machines {
		if p.done[m.Name] || !m.IP.IsValid() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		keys, err := p.lab.HostKeys(ctx, m.Name)
		cancel()
		if err != nil {
			t.Logf("host keys of %s not pinned yet: %v", m.Name, err)
			continue
		}
		if err := p.hk.Pin(m.IP.String(), keys...); err != nil {
			t.Fatalf("pin the host keys of %s: %v", m.Name, err)
		}
		p.done[m.Name] = true
	}
}

// labHostKeys is a fresh pin file holding every lab Machine's host keys,
// for a test's own SSH connections.
func labHostKeys(t testing.TB, l *lab.Lab) rpc.HostKeys {
	t.Helper()
	p := &labPins{lab: l, hk: rpc.HostKeys{Path: filepath.Join(t.TempDir(), "known_hosts")}}
	p.pin(t)
	return p.hk
}
