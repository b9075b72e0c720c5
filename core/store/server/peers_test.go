package server

import (
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
)

// TestRestartJoinsRememberedPeers restarts a node that has no bootstrap
// peers (a Cluster's first Machine) after its peer has marked it down, with
// the peer's own reconnects minutes away: only the members the node
// remembered from its last run can bring it back, and a row written on it
// must reach the peer.
func TestRestartJoinsRememberedPeers(t *testing.T) {
	c := newTestCluster(t, 2, 11, func(i int, cfg *Config) {
		if i == 0 {
			cfg.Bootstrap = nil // the founder joins nobody
		} else {
			cfg.SyncInterval = time.Minute // reconnects every 5 minutes
		}
	})
	waitFor(t, 10*time.Second, "the founder remembers its peer", func() bool {
		return len(loadPeers(c.node(0).peersFile())) == 1
	})
	if err := c.node(0).Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, detectWait(10*time.Second), "the peer marks the founder down", func() bool {
		return len(c.node(1).gsp.Alive()) == 0
	})
	time.Sleep(3 * time.Second) // past the time SWIM still gossips to the dead
	c.start(0)
	waitFor(t, detectWait(10*time.Second), "the peer sees the founder again", func() bool {
		return len(c.node(1).gsp.Alive()) == 1
	})
	if err := c.exec(0, crdt.Stmt{Query: `INSERT INTO kv(k, v) VALUES ('after', 'restart')`}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, detectWait(10*time.Second), "the row written after the restart on the peer", func() bool {
		var v string
		return c.node(1).Engine().ReadDB().QueryRow(`SELECT v FROM kv WHERE k = 'after'`).Scan(&v) == nil && v == "restart"
	})
}
