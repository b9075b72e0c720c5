package gossip

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// Config configures a gossip member.
type Config struct {
	Name      string   // unique member name (the store's site id)
	Bind      string   // host:port for UDP and TCP; port 0 picks one
	Advertise string   // host:port peers use; empty = Bind
	Bootstrap []string // host:port of peers to join
	Label     string   // keeps Clusters apart on a shared network
	Meta      []byte   // small metadata published with the member
	Fast      bool     // short timers for in-process tests
	Faults    *Faults  // optional fault injector
	Log       hclog.Logger
	// OnMessage receives every user message; it must not block for long.
	OnMessage func(msg []byte)
}

// MemberState is one member as this node observes it.
type MemberState struct {
	Name  string        `json:"name"`
	Addr  string        `json:"addr"`
	State string        `json:"state"` // up, suspect or down
	RTT   time.Duration `json:"rtt_ns"`
	Meta  []byte        `json:"meta,omitempty"`
}

// Gossip is a running member.
type Gossip struct {
	ml   *memberlist.Memberlist
	cfg  Config
	addr string

	mu    sync.Mutex
	known map[string]*MemberState
}

// Start binds the transport and joins any reachable bootstrap peers; an
// unreachable bootstrap is not an error since peers may come up later.
func Start(cfg Config) (*Gossip, error) {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	host, portS, err := net.SplitHostPort(cfg.Bind)
	if err != nil {
		return nil, fmt.Errorf("gossip bind address %q: %w", cfg.Bind, err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil {
		return nil, fmt.Errorf("gossip bind port %q: %w", portS, err)
	}
	mc := memberlist.DefaultLANConfig()
	if cfg.Fast {
		mc = memberlist.DefaultLocalConfig()
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.GossipInterval = 30 * time.Millisecond
		mc.SuspicionMult = 2
		mc.PushPullInterval = 2 * time.Second
		mc.TCPTimeout = 500 * time.Millisecond
		mc.GossipToTheDeadTime = 2 * time.Second
		mc.DeadNodeReclaimTime = time.Millisecond
	}
	mc.Name = cfg.Name
	mc.BindAddr = host
	mc.BindPort = port
	mc.Label = cfg.Label
	mc.Logger = cfg.Log.Named("memberlist").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: mc.Logger})
	if err != nil {
		return nil, fmt.Errorf("gossip listen on %s: %w", cfg.Bind, err)
	}
	port = nt.GetAutoBindPort()
	mc.BindPort = port
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if cfg.Advertise != "" {
		ah, ap, err := net.SplitHostPort(cfg.Advertise)
		if err != nil {
			nt.Shutdown()
			return nil, fmt.Errorf("gossip advertise address %q: %w", cfg.Advertise, err)
		}
		mc.AdvertiseAddr = ah
		mc.AdvertisePort, _ = strconv.Atoi(ap)
		addr = cfg.Advertise
	}
	mc.Transport = &faultTransport{Transport: nt, self: addr, faults: cfg.Faults}
	g := &Gossip{cfg: cfg, addr: addr, known: map[string]*MemberState{}}
	d := &delegate{g: g}
	mc.Delegate = d
	mc.Events = d
	mc.Ping = d
	g.ml, err = memberlist.Create(mc)
	if err != nil {
		nt.Shutdown()
		return nil, fmt.Errorf("start gossip on %s: %w", addr, err)
	}
	if len(cfg.Bootstrap) > 0 {
		g.Join(cfg.Bootstrap)
	}
	return g, nil
}

// Addr is the address peers reach this member on.
func (g *Gossip) Addr() string { return g.addr }

// Join contacts peers; failures are logged, not fatal.
func (g *Gossip) Join(peers []string) int {
	var others []string
	for _, p := range peers {
		if p != g.addr {
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		return 0
	}
	n, err := g.ml.Join(others)
	if err != nil {
		g.cfg.Log.Debug("join bootstrap peers", "peers", others, "joined", n, "error", err)
	}
	return n
}

// Alive returns the names of other members currently up or suspect.
func (g *Gossip) Alive() []*memberlist.Node {
	var out []*memberlist.Node
	for _, n := range g.ml.Members() {
		if n.Name != g.cfg.Name {
			out = append(out, n)
		}
	}
	return out
}

// Send delivers msg to one member: best effort (UDP) or reliable (TCP).
func (g *Gossip) Send(n *memberlist.Node, msg []byte, reliable bool) error {
	if reliable {
		return g.ml.SendReliable(n, msg)
	}
	return g.ml.SendBestEffort(n, msg)
}

// Member finds a live member by name.
func (g *Gossip) Member(name string) *memberlist.Node {
	for _, n := range g.ml.Members() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// States lists every member ever seen with its current SWIM state and the
// last measured round-trip time.
func (g *Gossip) States() []MemberState {
	live := map[string]memberlist.NodeStateType{}
	for _, n := range g.ml.Members() {
		live[n.Name] = n.State
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []MemberState
	for name, m := range g.known {
		s := *m
		switch st, ok := live[name]; {
		case !ok:
			s.State = "down"
		case st == memberlist.StateSuspect:
			s.State = "suspect"
		case st == memberlist.StateAlive:
			s.State = "up"
		default:
			s.State = "down"
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Shutdown stops the member without announcing a leave, as a crash would;
// peers notice through failed probes.
func (g *Gossip) Shutdown() error {
	if err := g.ml.Shutdown(); err != nil {
		return fmt.Errorf("stop gossip: %w", err)
	}
	return nil
}

// Leave announces departure then stops.
func (g *Gossip) Leave(timeout time.Duration) error {
	if err := g.ml.Leave(timeout); err != nil {
		g.cfg.Log.Debug("leave", "error", err)
	}
	return g.Shutdown()
}

type delegate struct{ g *Gossip }

func (d *delegate) NodeMeta(limit int) []byte {
	if len(d.g.cfg.Meta) > limit {
		return nil
	}
	return d.g.cfg.Meta
}

func (d *delegate) NotifyMsg(b []byte) {
	if d.g.cfg.OnMessage != nil && len(b) > 0 {
		d.g.cfg.OnMessage(append([]byte(nil), b...))
	}
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.note(n) }
func (d *delegate) NotifyLeave(n *memberlist.Node)  { d.note(n) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.note(n) }

func (d *delegate) note(n *memberlist.Node) {
	if n.Name == d.g.cfg.Name {
		return
	}
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	m := d.g.known[n.Name]
	if m == nil {
		m = &MemberState{Name: n.Name}
		d.g.known[n.Name] = m
	}
	m.Addr = n.Address()
	m.Meta = append([]byte(nil), n.Meta...)
}

func (d *delegate) AckPayload() []byte { return nil }

func (d *delegate) NotifyPingComplete(n *memberlist.Node, rtt time.Duration, _ []byte) {
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	if m := d.g.known[n.Name]; m != nil {
		m.RTT = rtt
	}
}
