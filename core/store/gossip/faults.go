// Package gossip runs SWIM membership (hashicorp/memberlist) for the store
// and carries its replication messages. Every packet and stream passes
// through a transport seam that can partition, drop and delay traffic, so
// tests can inject faults into the same code production runs.
package gossip

import (
	"errors"
	"math/rand"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Faults decides, per sender and receiver address, whether traffic passes.
// The zero value lets everything through. Faults are applied by the
// sender, so a partition between two nodes needs both to share one Faults.
type Faults struct {
	mu       sync.Mutex
	rng      *rand.Rand
	group    map[string]int // address -> partition group; absent = group 0
	isolated map[string]bool
	drop     float64
	maxDelay time.Duration
	latency  time.Duration // every message's base delay (SetLatency)
	jitter   time.Duration
}

// NewFaults returns a fault injector drawing randomness from seed.
func NewFaults(seed int64) *Faults {
	return &Faults{rng: rand.New(rand.NewSource(seed)), group: map[string]int{}, isolated: map[string]bool{}}
}

// Partition places each list of addresses in its own group; traffic only
// flows within a group. Addresses not listed stay in group 0.
func (f *Faults) Partition(groups ...[]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.group = map[string]int{}
	for i, g := range groups {
		for _, a := range g {
			f.group[a] = i + 1
		}
	}
}

// Heal removes partitions, drops and the delays of SetLoss. The latency
// of SetLatency stays: it is the simulated network, not a fault.
func (f *Faults) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.group = map[string]int{}
	f.isolated = map[string]bool{}
	f.drop = 0
	f.maxDelay = 0
}

// SetLoss drops each message with probability p and delays the rest by up
// to maxDelay (so packets can also be reordered).
func (f *Faults) SetLoss(p float64, maxDelay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop = p
	f.maxDelay = maxDelay
}

// SetLatency delays every message by base ± jitter (uniform), the one-way
// latency of a simulated network; SetLoss's delays add to it.
func (f *Faults) SetLatency(base, jitter time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latency = base
	f.jitter = min(jitter, base)
}

// verdict returns whether to drop a message from -> to and how long to delay it.
func (f *Faults) verdict(from, to string) (bool, time.Duration) {
	if f == nil {
		return false, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.group[from] != f.group[to] {
		return true, 0
	}
	if f.drop > 0 && f.rng.Float64() < f.drop {
		return true, 0
	}
	delay := f.latency
	if f.jitter > 0 {
		delay += time.Duration(f.rng.Int63n(int64(2*f.jitter)+1)) - f.jitter
	}
	if f.maxDelay > 0 {
		delay += time.Duration(f.rng.Int63n(int64(f.maxDelay)))
	}
	return false, delay
}

var errInjected = errors.New("connection refused by fault injector")

// faultTransport wraps memberlist's network transport with Faults and
// counts what the member sends (traffic).
type faultTransport struct {
	memberlist.Transport
	self    string
	faults  *Faults
	traffic *traffic
}

// WriteTo sends a packet unless the injector drops it; a delayed packet is
// sent later from its own goroutine, which may reorder packets.
func (t *faultTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.traffic.packets.Add(int64(len(b)))
	drop, delay := t.faults.verdict(t.self, addr)
	now := time.Now()
	if drop {
		return now, nil // lost on the wire: the sender cannot tell
	}
	if delay == 0 {
		return t.Transport.WriteTo(b, addr)
	}
	buf := append([]byte(nil), b...)
	go func() {
		time.Sleep(delay)
		_, _ = t.Transport.WriteTo(buf, addr)
	}()
	return now, nil
}

// DialTimeout opens a stream unless the injector refuses it.
func (t *faultTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	drop, delay := t.faults.verdict(t.self, addr)
	if drop {
		return nil, errInjected
	}
	time.Sleep(delay)
	c, err := t.Transport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, n: &t.traffic.streams}, nil
}
