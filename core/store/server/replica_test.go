package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
)

func TestReplicationThreeNodes(t *testing.T) {
	c := newTestCluster(t, 3, 1, nil)
	waitMembers(t, c)
	if err := c.exec(0, crdt.Stmt{Query: `INSERT INTO kv(k, v) VALUES ('a', 'one')`}); err != nil {
		t.Fatal(err)
	}
	want := dumpKV(t, c.node(0))
	waitFor(t, 5*time.Second, "replication", func() bool {
		for i := 1; i < 3; i++ {
			if !bytes.Equal(dumpKV(t, c.node(i)), want) {
				return false
			}
		}
		return true
	})
	// A CPU-starved host can make a member suspect for a moment (seen in
	// a loaded run); it must settle up.
	waitFor(t, 10*time.Second, "every member up", func() bool {
		ms := c.node(0).Members()
		for _, m := range ms {
			if m.State != "up" {
				return false
			}
		}
		return len(ms) > 0
	})
}

// A row one node deletes and another writes again afterwards (a Machine
// rewriting the row a member deleted) is present on every node: the later
// write resurrects it instead of losing to the delete.
func TestDeleteThenUpsertElsewhereResurrects(t *testing.T) {
	c := newTestCluster(t, 3, 2, nil)
	waitMembers(t, c)
	converged := func(what string) []byte {
		want := dumpKV(t, c.node(2))
		waitFor(t, 10*time.Second, what, func() bool {
			for i := 0; i < 2; i++ {
				if !bytes.Equal(dumpKV(t, c.node(i)), want) {
					return false
				}
			}
			return true
		})
		return want
	}
	if err := c.exec(2, crdt.Stmt{Query: `INSERT INTO kv(k, v) VALUES ('m3', 'row')`}); err != nil {
		t.Fatal(err)
	}
	converged("the row everywhere")
	if err := c.exec(1, crdt.Stmt{Query: `DELETE FROM kv WHERE k = 'm3'`}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the delete everywhere", func() bool { return string(dumpKV(t, c.node(2))) == "null" })
	if err := c.exec(2, crdt.Stmt{Query: `INSERT INTO kv(k, v) VALUES ('m3', 'again') ON CONFLICT(k) DO UPDATE SET v = excluded.v`}); err != nil {
		t.Fatal(err)
	}
	if got := string(converged("the rewritten row everywhere")); got != `[["m3","again",null]]` {
		t.Fatalf("after delete and rewrite every node holds %s", got)
	}
}

// waitMembers waits until every node sees the others alive.
func waitMembers(t *testing.T, c *testCluster) {
	t.Helper()
	waitFor(t, 10*time.Second, "membership", func() bool {
		for i := range c.nodes {
			if len(c.node(i).gsp.Alive()) != len(c.nodes)-1 {
				return false
			}
		}
		return true
	})
}
