// Package server is Ployz's Corrosion-compatible store: a node that keeps
// replicated SQLite tables (package crdt), gossips with peers (package
// gossip), serves Corrosion's HTTP API subset and an admin unix socket.
package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/store/crdt"
	"github.com/ployz/ployz/core/store/gossip"
	"github.com/ployz/ployz/internal/localsock"
)

// GossipFDName names the gossip sockets in ployz-store.service's fd store
// (with -tcp and -udp): a restart of the store never frees its gossip
// port for another local user to take.
const GossipFDName = "ployz-store-gossip"

// Config configures a store node.
type Config struct {
	DBPath        string   // SQLite file
	SchemaPaths   []string // .sql files or directories
	SchemaSQL     string   // used instead of SchemaPaths when set
	SubsPath      string   // subscription state database; default next to DBPath
	GossipAddr    string   // bind host:port for SWIM and replication
	GossipExtAddr string   // advertised host:port; default GossipAddr
	Bootstrap     []string // peers to join
	Label         string   // Cluster label; members with another label are ignored
	GossipKey     []byte   // Cluster gossip key; see gossip.Config.Key
	// PlainGossip runs gossip without a key. Only tests set it: with a
	// gossip address and neither a key nor PlainGossip, Start refuses.
	PlainGossip bool
	APIAddr     string // HTTP API TCP listen address; empty disables it
	Token       string // bearer token required by the TCP API
	// APISocket serves the same API on a unix socket, in a directory the
	// store makes 0700, to root and the store's own uid only (no token):
	// what every process on the Machine uses. Empty disables it.
	APISocket string
	// NoAuth serves the API without a token. Only tests set it: without a
	// token and without NoAuth, Start refuses to serve the API.
	NoAuth       bool
	AdminPath    string // admin unix socket; empty disables it
	MaxBodyBytes int64  // request body cap; default 8 MiB
	SyncInterval time.Duration
	Fast         bool           // short gossip timers (tests)
	Faults       *gossip.Faults // optional fault injector (tests)
	Log          hclog.Logger
}

// Node is a running store node.
type Node struct {
	cfg  Config
	log  hclog.Logger
	eng  *crdt.Engine
	gsp  *gossip.Gossip
	subs *subManager

	applyCh   chan []crdt.Changeset
	syncReqs  pendingSyncs
	syncSkips int // rounds requestSync skipped in a row (syncLoop only)
	outCh     chan crdt.Changeset
	stop      chan struct{}
	wg        sync.WaitGroup

	apiLn   net.Listener
	api     *http.Server
	sockLn  net.Listener
	sockAPI *http.Server
	adminLn net.Listener

	updates updateHub
	out     senders
	sent    sentBytes

	hookMu sync.Mutex
	hooks  []func(crdt.Commit)
}

// nodeMeta is published through gossip so peers can find each other's API.
type nodeMeta struct {
	API string `json:"api,omitempty"`
	// SyncDigest: the node answers msgSyncDigest, so peers send it a
	// digest of their book instead of the book itself.
	SyncDigest bool `json:"sync_digest,omitempty"`
}

// Start opens the database, applies the schema, joins the Cluster and, when
// configured, serves the HTTP API and the admin socket.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.SyncInterval == 0 {
		cfg.SyncInterval = time.Second
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if cfg.SubsPath == "" {
		cfg.SubsPath = filepath.Join(filepath.Dir(cfg.DBPath), "subscriptions.db")
	}
	if cfg.APIAddr != "" && cfg.Token == "" && !cfg.NoAuth {
		return nil, fmt.Errorf("store API on %s has no bearer token: refusing to serve it unauthenticated (set a token file)", cfg.APIAddr)
	}
	if cfg.APIAddr != "" && cfg.Token != "" && cfg.NoAuth {
		return nil, fmt.Errorf("store config sets both a bearer token and NoAuth")
	}
	if cfg.GossipAddr != "" && len(cfg.GossipKey) == 0 && !cfg.PlainGossip {
		return nil, fmt.Errorf("gossip on %s has no Cluster key: refusing to replicate unauthenticated (set a gossip key file)", cfg.GossipAddr)
	}
	if err := secureFiles(cfg.DBPath, cfg.SubsPath); err != nil {
		return nil, err
	}
	schema := cfg.SchemaSQL
	if schema == "" {
		var err error
		if schema, err = crdt.ReadSchemaPaths(cfg.SchemaPaths); err != nil {
			return nil, err
		}
	}
	eng, err := crdt.Open(ctx, cfg.DBPath, schema, cfg.Log.Named("crdt"))
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, log: cfg.Log, eng: eng,
		applyCh:  make(chan []crdt.Changeset, 1024),
		syncReqs: pendingSyncs{ready: make(chan struct{}, 1)},
		outCh:    make(chan crdt.Changeset, 4096),
		stop:     make(chan struct{}),
	}
	n.out.n = n
	if n.subs, err = openSubs(ctx, cfg.SubsPath, eng, cfg.Log.Named("subs")); err != nil {
		eng.Close()
		return nil, err
	}
	eng.OnCommit(n.onCommit)
	if err := n.startNet(cfg); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) startNet(cfg Config) error {
	var err error
	if cfg.APIAddr != "" {
		if n.apiLn, err = net.Listen("tcp", cfg.APIAddr); err != nil {
			return fmt.Errorf("listen for API on %s: %w", cfg.APIAddr, err)
		}
	}
	meta, _ := json.Marshal(nodeMeta{API: n.APIAddr(), SyncDigest: true})
	if cfg.GossipAddr != "" {
		n.gsp, err = gossip.Start(gossip.Config{
			// Bootstrap peers are joined by rejoinLoop, so an unreachable
			// peer (each costs up to the TCP timeout) never delays startup.
			Name: n.eng.Site(), Bind: cfg.GossipAddr, Advertise: cfg.GossipExtAddr,
			Label: cfg.Label, Key: cfg.GossipKey, Meta: meta, Fast: cfg.Fast, Faults: cfg.Faults, Log: cfg.Log.Named("gossip"),
			OnMessage: n.onMessage, KeepAs: GossipFDName,
		})
		if err != nil {
			return err
		}
		n.wg.Add(3)
		go n.broadcastLoop()
		go n.applyLoop()
		go n.syncLoop()
		// Not in wg: a Join in flight may take the TCP timeout per address
		// and must not hold up Close; it fails fast once gossip shuts down.
		go n.rejoinLoop()
	}
	if n.apiLn != nil {
		n.api = n.serveAPI(n.apiLn, false)
	}
	if cfg.APISocket != "" {
		if n.sockLn, err = localsock.Listen(cfg.APISocket, n.logRefused); err != nil {
			return fmt.Errorf("API socket: %w", err)
		}
		n.sockAPI = n.serveAPI(n.sockLn, true)
	}
	if cfg.AdminPath != "" {
		if err := n.startAdmin(cfg.AdminPath); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) serveAPI(ln net.Listener, tokenless bool) *http.Server {
	srv := newAPIServer(n, tokenless)
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			n.log.Error("API server stopped", "listener", ln.Addr().String(), "error", err)
		}
	}()
	return srv
}

func (n *Node) logRefused(err error) { n.log.Warn("store socket", "error", err) }

// rejoinLoop keeps contacting down members and unreached bootstrap peers,
// so a node started before its peers finds them and the two sides of a
// healed partition merge again however long it lasted.
//
// A restart first contacts the members the last run knew (peersFile): a
// node without bootstrap peers (a Cluster's first Machine) would otherwise
// wait, alone, until a peer's periodic push-pull happened to pick it, and
// commits made meanwhile would reach nobody.
func (n *Node) rejoinLoop() {
	known := loadPeers(n.peersFile())
	n.gsp.Join(append(append([]string(nil), n.cfg.Bootstrap...), known...))
	t := time.NewTicker(5 * n.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.gsp.Reconnect(n.cfg.Bootstrap)
			known = n.savePeers(known)
		}
	}
}

func (n *Node) onCommit(c crdt.Commit) {
	if c.Local && n.gsp != nil {
		for _, cs := range c.Changesets {
			select {
			case n.outCh <- cs:
			default: // backlog full: peers will pull it through anti-entropy
			}
		}
	}
	n.subs.notify(c.Tables)
	n.updates.publish(c)
	n.hookMu.Lock()
	hooks := n.hooks
	n.hookMu.Unlock()
	for _, h := range hooks {
		h(c)
	}
}

// OnCommit registers a hook called after each commit (tests, metrics).
func (n *Node) OnCommit(f func(crdt.Commit)) {
	n.hookMu.Lock()
	defer n.hookMu.Unlock()
	n.hooks = append(n.hooks, f)
}

// Engine exposes the node's database engine.
func (n *Node) Engine() *crdt.Engine { return n.eng }

// GossipAddr is the address peers reach this node on, or "".
func (n *Node) GossipAddr() string {
	if n.gsp == nil {
		return ""
	}
	return n.gsp.Addr()
}

// APIAddr is the HTTP API address, or "" when the API is off.
func (n *Node) APIAddr() string {
	if n.apiLn == nil {
		return ""
	}
	return n.apiLn.Addr().String()
}

// APISocket is the API's unix socket path, or "" when it is off.
func (n *Node) APISocket() string {
	if n.sockLn == nil {
		return ""
	}
	return n.cfg.APISocket
}

// Members returns the SWIM view of the other members.
func (n *Node) Members() []gossip.MemberState {
	if n.gsp == nil {
		return nil
	}
	return n.gsp.States()
}

// upDownChanged is closed at the next member going up or down; nil (never
// ready) without gossip.
func (n *Node) upDownChanged() <-chan struct{} {
	if n.gsp == nil {
		return nil
	}
	return n.gsp.UpDownChanged()
}

// CaughtUp reports whether every version up to target's head per site has
// been applied locally.
func (n *Node) CaughtUp(target map[string]int64) bool {
	b := n.eng.Book()
	for site, v := range target {
		if b.Head(site) < v {
			return false
		}
	}
	return true
}

// Close stops serving and releases the database; it does not announce a
// leave, so peers see the same as a crash (they mark the node down).
func (n *Node) Close() error {
	select {
	case <-n.stop:
		return nil
	default:
	}
	close(n.stop)
	stopAPI(n.api, n.apiLn)
	stopAPI(n.sockAPI, n.sockLn)
	if n.adminLn != nil {
		n.adminLn.Close()
	}
	if n.gsp != nil {
		_ = n.gsp.Shutdown()
	}
	n.wg.Wait()
	n.subs.close()
	return n.eng.Close()
}

func stopAPI(srv *http.Server, ln net.Listener) {
	if srv == nil {
		if ln != nil {
			ln.Close()
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = srv.Shutdown(ctx)
	cancel()
	_ = srv.Close()
}
