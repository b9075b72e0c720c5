package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
)

func TestReplicationThreeNodes(t *testing.T) {
	c := newTestCluster(t, 3, 1, nil)
	waitFor(t, 10*time.Second, "membership", func() bool {
		for i := range c.nodes {
			if len(c.node(i).gsp.Alive()) != 2 {
				return false
			}
		}
		return true
	})
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
	for _, m := range c.node(0).Members() {
		if m.State != "up" {
			t.Errorf("member %s state %s, want up", m.Name, m.State)
		}
	}
}
