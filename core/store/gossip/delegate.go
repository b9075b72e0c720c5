package gossip

import (
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// delegate receives memberlist's callbacks for one Gossip.
type delegate struct{ g *Gossip }

// NodeMeta publishes the configured metadata (memberlist.Delegate).
func (d *delegate) NodeMeta(limit int) []byte {
	if len(d.g.cfg.Meta) > limit {
		return nil
	}
	return d.g.cfg.Meta
}

// NotifyMsg hands a copy of a user message to OnMessage; memberlist reuses b.
func (d *delegate) NotifyMsg(b []byte) {
	if d.g.cfg.OnMessage != nil && len(b) > 0 {
		d.g.cfg.OnMessage(append([]byte(nil), b...))
	}
}

// GetBroadcasts is unused: changes are pushed directly, not piggybacked.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState is unused: anti-entropy runs over user messages.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState is unused, see LocalState.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin marks a member up.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.note(n, true) }

// NotifyLeave marks a member down (dead or left).
func (d *delegate) NotifyLeave(n *memberlist.Node) { d.note(n, false) }

// NotifyUpdate refreshes a member's address and metadata.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.note(n, true) }

// note copies what it needs from n; memberlist calls it with its node lock
// held, the only time reading n is safe.
func (d *delegate) note(n *memberlist.Node, up bool) {
	if n.Name == d.g.cfg.Name {
		return
	}
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	p := d.g.peers[n.Name]
	if p == nil {
		p = &peer{name: n.Name}
		d.g.peers[n.Name] = p
	}
	if up && !p.up {
		p.lastAck = time.Now() // a fresh join counts as heard from
	}
	if p.up != up || p.ip == nil {
		close(d.g.upDown) // wakes the readers waiting for a change
		d.g.upDown = make(chan struct{})
	}
	p.up = up
	p.ip = append(net.IP(nil), n.Addr...)
	p.port = n.Port
	p.meta = append([]byte(nil), n.Meta...)
}

// AckPayload sends nothing extra with probe acks.
func (d *delegate) AckPayload() []byte { return nil }

// NotifyPingComplete records the RTT of a successful probe.
func (d *delegate) NotifyPingComplete(n *memberlist.Node, rtt time.Duration, _ []byte) {
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	if p := d.g.peers[n.Name]; p != nil {
		p.rtt = rtt
		p.lastAck = time.Now()
	}
}

// peer is this package's own copy of a member.
type peer struct {
	name    string
	ip      net.IP
	port    uint16
	meta    []byte
	up      bool
	rtt     time.Duration
	lastAck time.Time
}

func (p *peer) addr() string { return net.JoinHostPort(p.ip.String(), strconv.Itoa(int(p.port))) }

func (p *peer) node() *memberlist.Node {
	return &memberlist.Node{Name: p.name, Addr: p.ip, Port: p.port, Meta: p.meta}
}
