package server

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
)

// dbFiles are what power loss can roll back: the database and its WAL.
var dbFiles = []string{"", "-wal", "-shm"}

func copyDBFiles(t *testing.T, db, suffix string) {
	t.Helper()
	for _, f := range dbFiles {
		src, err := os.Open(db + f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(db + f + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		src.Close()
		dst.Close()
	}
}

// restoreDBFiles puts back the copy taken by copyDBFiles, as if the WAL
// tail written since had never reached the disk.
func restoreDBFiles(t *testing.T, db, suffix string) {
	t.Helper()
	for _, f := range dbFiles {
		if err := os.Remove(db + f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if _, err := os.Stat(db + f + suffix); err == nil {
			if err := os.Rename(db+f+suffix, db+f); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestPowerLossNoVersionReuse rolls a node's database back to a copy
// taken before a commit its peers already hold, writes again, and checks
// every node converges byte for byte with no version handed out twice.
func TestPowerLossNoVersionReuse(t *testing.T) {
	c := newTestCluster(t, 3, 7, nil)
	if err := c.exec(0, crdt.Stmt{Query: `INSERT INTO kv(k, v) VALUES ('a', 'first')`}); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, c, 15*time.Second)

	db := c.config(0).DBPath
	c.node(0).Close()
	copyDBFiles(t, db, ".before")
	c.start(0)

	// The commit power loss will take: peers receive it first.
	lost := c.node(0).Engine().Book().Max(c.node(0).Engine().Site()) + 1
	if err := c.exec(0, crdt.Stmt{Query: `UPDATE kv SET v = 'lost-but-shared' WHERE k = 'a'`}); err != nil {
		t.Fatal(err)
	}
	site := c.node(0).Engine().Site()
	waitFor(t, 15*time.Second, "peers to hold the commit", func() bool {
		return c.node(1).Engine().Book().Has(site, lost, lost) && c.node(2).Engine().Book().Has(site, lost, lost)
	})

	c.node(0).Close()
	restoreDBFiles(t, db, ".before")
	c.start(0)
	if got := c.node(0).Engine().Site(); got != site {
		t.Fatalf("site changed across restore: %s -> %s", site, got)
	}

	// 'again' sorts below 'lost-but-shared': had version `lost` been reused
	// the peers would skip it and keep the other value.
	_, v, err := c.node(0).Engine().Exec(t.Context(), []crdt.Stmt{{Query: `UPDATE kv SET v = 'again' WHERE k = 'a'`}})
	if err != nil {
		t.Fatal(err)
	}
	if v == nil || *v <= lost {
		t.Fatalf("write after restore got version %d, want above %d (already held by peers)", deref(v), lost)
	}
	waitConverged(t, c, 20*time.Second)
	for i := 0; i < 3; i++ {
		if g := c.node(i).Engine().Book().Gaps(); g != 0 {
			t.Errorf("node %d book has %d gaps after convergence", i, g)
		}
	}
}

// waitConverged waits until every node's kv table and version vector match.
func waitConverged(t *testing.T, c *testCluster, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d0 := dumpKV(t, c.node(0))
		same := true
		for i := 1; i < len(c.nodes); i++ {
			if !bytes.Equal(d0, dumpKV(t, c.node(i))) || !sameVector(c.node(0), c.node(i)) {
				same = false
			}
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			for i := range c.nodes {
				t.Logf("node %d: %s book %v", i, dumpKV(t, c.node(i)), c.node(i).Engine().Book())
			}
			t.Fatalf("nodes did not converge within %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sameVector(a, b *Node) bool {
	va, vb := a.Engine().Book().Vector(), b.Engine().Book().Vector()
	if len(va) != len(vb) {
		return false
	}
	for k, v := range va {
		if vb[k] != v {
			return false
		}
	}
	return true
}

func deref(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}
