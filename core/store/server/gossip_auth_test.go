package server

import (
	"bytes"
	"crypto/sha256"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/ployz/ployz/core/store/crdt"
)

// attacker is a memberlist on loopback that is not a Cluster member: no
// key, or the wrong one.
func attacker(t *testing.T, key []byte) *memberlist.Memberlist {
	t.Helper()
	mc := memberlist.DefaultLocalConfig()
	mc.Name = "intruder-" + strconv.Itoa(len(key))
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = "127.0.0.1", 0, 0
	mc.TCPTimeout = 500 * time.Millisecond
	mc.LogOutput = os.Stderr
	if os.Getenv("STORE_TEST_LOG") == "" {
		mc.Logger = nil
		mc.LogOutput = devNull{}
	}
	mc.SecretKey = key
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Shutdown() })
	return ml
}

type devNull struct{}

func (devNull) Write(b []byte) (int, error) { return len(b), nil }

// forgedRow is a changeset from a made-up site inserting kv row 'forged'.
func forgedRow(t *testing.T) []byte {
	t.Helper()
	pk := `["forged"]`
	cs := crdt.Changeset{Site: "00000000000000000000000000000bad", Version: 1, LastVersion: 1, Changes: []crdt.Change{
		{Table: "kv", PK: pk, Col: crdt.SentinelCol, CL: 1, ColVersion: 1},
		{Table: "kv", PK: pk, Col: "v", Val: crdt.Value{K: crdt.KindText, S: "pwned"}, ColVersion: 1, CL: 1, Seq: 1},
	}}
	msg, err := encodeEnvelope(envelope{Kind: msgChanges, From: cs.Site, Changesets: []crdt.Changeset{cs}})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func nodeOf(t *testing.T, addr string) *memberlist.Node {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return &memberlist.Node{Name: "target", Addr: net.ParseIP(h), Port: uint16(port)}
}

// storeDigest hashes a node's database files and renders its rows and
// book, for a byte-for-byte before/after comparison.
func storeDigest(t *testing.T, n *Node, db string) string {
	t.Helper()
	h := sha256.New()
	for _, f := range []string{db, db + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		h.Write(b)
	}
	h.Write(dumpKV(t, n))
	return string(h.Sum(nil))
}

// TestGossipRefusesNonMembers sends a forged changeset datagram and stream
// and tries a memberlist join from outside the Cluster (no key, wrong
// key): every attempt is refused and the store stays byte-identical. The
// same datagram against a keyless store writes the row, so the test sees
// the attack work when the key is missing.
func TestGossipRefusesNonMembers(t *testing.T) {
	c := newTestCluster(t, 2, 11, nil)
	if err := c.exec(0, crdt.Stmt{Query: `INSERT INTO kv(k, v) VALUES ('real', 'row')`}); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, c, 15*time.Second)
	time.Sleep(500 * time.Millisecond) // let the broadcast and first syncs settle
	target := c.node(0)
	db := c.config(0).DBPath
	before := storeDigest(t, target, db)
	msg := forgedRow(t)

	for _, key := range [][]byte{nil, []byte("fedcba9876543210fedcba9876543210")} {
		a := attacker(t, key)
		to := nodeOf(t, target.GossipAddr())
		if err := a.SendBestEffort(to, msg); err != nil {
			t.Fatalf("send datagram: %v", err)
		}
		_ = a.SendReliable(to, msg) // refused at the stream's first frame
		if n, err := a.Join([]string{target.GossipAddr()}); err == nil || n != 0 {
			t.Errorf("join with key of %d bytes: joined %d, err %v; want a refusal", len(key), n, err)
		}
		if got := len(a.Members()); got != 1 {
			t.Errorf("intruder sees %d members, want only itself", got)
		}
	}
	time.Sleep(time.Second) // time for anything accepted to be applied
	for _, m := range target.Members() {
		if m.State != "down" && len(m.Name) > 8 && m.Name[:8] == "intruder" {
			t.Errorf("intruder %s listed as a member", m.Name)
		}
	}
	if after := storeDigest(t, target, db); after != before {
		t.Fatalf("store changed after refused gossip: rows %s", dumpKV(t, target))
	}
	if bytes.Contains(dumpKV(t, target), []byte("pwned")) {
		t.Fatal("forged row applied")
	}

	// Control: the same datagram against a store without a key lands.
	plain := newTestCluster(t, 1, 12, func(_ int, cfg *Config) { cfg.GossipKey, cfg.PlainGossip = nil, true })
	a := attacker(t, nil)
	if err := a.SendBestEffort(nodeOf(t, plain.node(0).GossipAddr()), msg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the forged row to land on the keyless store", func() bool {
		return bytes.Contains(dumpKV(t, plain.node(0)), []byte("pwned"))
	})
}
