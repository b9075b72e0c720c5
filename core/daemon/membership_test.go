package daemon

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store/schema"
	"github.com/ployz/ployz/core/store/server"
	"github.com/ployz/ployz/sdk/store"
)

// gossipDaemon is a participating Daemon whose store node gossips with a
// second real node and serves the admin socket where the daemon looks for
// it. It returns the daemon, its store client and the peer node.
func gossipDaemon(t *testing.T, self string) (*Daemon, *store.Client, *server.Node) {
	t.Helper()
	addr := freeAddr(t)
	run := t.TempDir()
	d := &Daemon{cfg: Config{DataDir: t.TempDir(), RunDir: run}, log: hclog.NewNullLogger(),
		rec: machine.Record{ID: self, Name: "self", Phase: machine.Participating}}
	key := make([]byte, 32)
	start := func(name string, cfg server.Config) *server.Node {
		cfg.DBPath = filepath.Join(t.TempDir(), name+".db")
		cfg.SchemaSQL = schema.SQL()
		cfg.GossipKey = key
		cfg.Fast = true
		cfg.SyncInterval = 100 * time.Millisecond
		n, err := server.Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	own := start("own", server.Config{GossipAddr: "127.0.0.1:0", APIAddr: addr, Token: "tok", AdminPath: d.adminSocket()})
	peer := start("peer", server.Config{GossipAddr: "127.0.0.1:0", Bootstrap: []string{own.GossipAddr()}})
	st := store.New(addr, store.WithToken("tok"))
	d.active = &active{store: st}
	return d, st, peer
}

// TestMembership reads the store's gossip view over its admin socket: the
// peer node is up with a round-trip time and named by the Machine whose
// row carries its store site; list_machines shows the same state; once
// the peer stops it is no longer up.
func TestMembership(t *testing.T) {
	d, st, peer := gossipDaemon(t, "m1")
	ctx := context.Background()
	site := peer.Engine().Site()
	if _, err := st.Machines().Put(ctx, store.Row[store.MachineBody]{Key: "m2", Owner: "m2", Body: store.MachineBody{Name: "two", StoreSite: site}}); err != nil {
		t.Fatal(err)
	}
	var m rpc.Member
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := hcall(t, featuretest.Typed(d.membership), nil)
		if err != nil {
			t.Fatal(err)
		}
		ms := res.(rpc.Membership)
		if ms.ObserverID != "m1" {
			t.Fatalf("observer %q", ms.ObserverID)
		}
		for _, x := range ms.Members {
			if x.ID == site {
				m = x
			}
		}
		if m.State == "up" && m.RTTMillis > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("peer %s never up with an RTT: %+v", site, ms.Members)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m.MachineID != "m2" || m.MachineName != "two" || m.Addr != peer.GossipAddr() {
		t.Fatalf("member %+v, want Machine m2 at %s", m, peer.GossipAddr())
	}
	res, err := hcall(t, featuretest.Typed(d.listMachines), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.(rpc.MachineList).Machines {
		if v.ID == "m2" && (v.Membership != "up" || v.RTTMillis <= 0) {
			t.Fatalf("list_machines m2 %+v", v)
		}
	}

	peer.Close()
	deadline = time.Now().Add(20 * time.Second)
	for {
		state := ""
		for _, x := range d.members(ctx) {
			if x.ID == site {
				state = x.State
			}
		}
		if state != "up" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a stopped peer stayed up")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// No admin socket: no members, and the reason is not an error to the caller.
	d.cfg.RunDir = t.TempDir()
	if got := d.members(ctx); len(got) != 0 {
		t.Fatalf("members without a socket: %+v", got)
	}
	if _, err := adminCall(ctx, d.adminSocket(), "Ping"); err == nil {
		t.Fatal("adminCall without a socket succeeded")
	}
}
