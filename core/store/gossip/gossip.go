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
	// Key is the Cluster's gossip key (16, 24 or 32 bytes, AES-GCM). With
	// it every packet and stream is encrypted and authenticated, and any
	// that fails is dropped: a non-member can neither inject a message
	// nor join nor read the store. Empty runs plaintext (tests only).
	Key    []byte
	Meta   []byte  // small metadata published with the member
	Fast   bool    // short timers for in-process tests
	Faults *Faults // optional fault injector
	// KeepAs, when set, keeps the gossip sockets in systemd's fd store
	// under KeepAs+"-tcp" and KeepAs+"-udp" (fdstore.ListenTCP), so a
	// restart never frees the gossip port. Outside systemd it changes
	// nothing.
	KeepAs string
	Log    hclog.Logger
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

	probeInterval time.Duration
	traffic       traffic

	mu    sync.Mutex
	peers map[string]*peer
	// upDown is closed, and replaced, when a member is first seen or
	// goes up or down (UpDownChanged).
	upDown chan struct{}
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
	if len(cfg.Key) > 0 {
		switch len(cfg.Key) {
		case 16, 24, 32:
		default:
			return nil, fmt.Errorf("gossip key is %d bytes, want 16, 24 or 32", len(cfg.Key))
		}
		mc.SecretKey = append([]byte(nil), cfg.Key...)
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	mc.Logger = cfg.Log.Named("memberlist").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	tl, ul, err := listenGossip(cfg.Bind, cfg.KeepAs)
	if err != nil {
		return nil, err
	}
	nt := newKeptTransport(tl, ul, cfg.Log.Named("transport"))
	port = nt.port()
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
	g := &Gossip{cfg: cfg, addr: addr, peers: map[string]*peer{}, upDown: make(chan struct{}), probeInterval: mc.ProbeInterval}
	mc.Transport = &faultTransport{Transport: nt, self: addr, faults: cfg.Faults, traffic: &g.traffic}
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
	seen := map[string]bool{g.addr: true}
	for _, p := range peers {
		if !seen[p] {
			seen[p] = true
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

// Reconnect tries to join every member this node has seen go down and
// every bootstrap address no live member holds. SWIM stops probing dead
// members after a while, so without this two sides of a long partition
// would each stay whole and never merge again. It returns how many
// addresses answered.
func (g *Gossip) Reconnect(bootstrap []string) int {
	g.mu.Lock()
	live := map[string]bool{}
	var targets []string
	for _, p := range g.peers {
		if p.up {
			live[p.addr()] = true
		} else {
			targets = append(targets, p.addr())
		}
	}
	g.mu.Unlock()
	for _, b := range bootstrap {
		if !live[b] {
			targets = append(targets, b)
		}
	}
	return g.Join(targets)
}

// PeerAddrs lists the address of every other member this node has met,
// up or down, sorted: what a restart should contact first.
func (g *Gossip) PeerAddrs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.peers))
	for _, p := range g.peers {
		out = append(out, p.addr())
	}
	sort.Strings(out)
	return out
}

// Alive returns the other members SWIM currently holds as up or suspect.
// The nodes are this package's copies: memberlist mutates its own Node
// values concurrently, so they are copied only inside its event callbacks.
func (g *Gossip) Alive() []*memberlist.Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*memberlist.Node
	for _, p := range g.peers {
		if p.up {
			out = append(out, p.node())
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
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.peers[name]; p != nil && p.up {
		return p.node()
	}
	return nil
}

// States lists every member ever seen: "down" once SWIM declared it dead
// or it left, "suspect" while SWIM still lists it but this node's own
// probes have gone unanswered for several probe rounds, else "up".
func (g *Gossip) States() []MemberState {
	g.mu.Lock()
	defer g.mu.Unlock()
	alive := 0
	for _, p := range g.peers {
		if p.up {
			alive++
		}
	}
	// Memberlist probes one member per interval, so each peer is probed
	// about every alive*interval; one missed round makes it suspect.
	grace := time.Duration(alive+1) * g.probeInterval
	var out []MemberState
	for _, p := range g.peers {
		s := MemberState{Name: p.name, Addr: p.addr(), RTT: p.rtt, Meta: p.meta, State: "down"}
		if p.up {
			s.State = "up"
			if time.Since(p.lastAck) > grace {
				s.State = "suspect"
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// UpDownChanged returns a channel closed at the next change of which
// members are up and which down (a member first seen, joining, dead or
// left): what States reports as "down" changes only then, so a reader
// of the down set waits on it instead of polling.
func (g *Gossip) UpDownChanged() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.upDown
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
