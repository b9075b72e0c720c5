package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hashicorp/memberlist"

	"github.com/ployz/ployz/core/store/crdt"
)

// TestDigestOnlyToNodesThatReadIt: a node of a release before digests
// publishes metadata without the flag and must keep getting whole books,
// or it would answer an empty book with everything it holds.
func TestDigestOnlyToNodesThatReadIt(t *testing.T) {
	old, _ := json.Marshal(map[string]string{"api": "10.0.0.1:8080"})
	cur, _ := json.Marshal(nodeMeta{API: "10.0.0.2:8080", SyncDigest: true})
	if digestCapable(&memberlist.Node{Name: "old", Meta: old}) {
		t.Fatal("a node without sync_digest in its metadata counts as reading digests")
	}
	if !digestCapable(&memberlist.Node{Name: "cur", Meta: cur}) {
		t.Fatal("a node publishing sync_digest does not count as reading digests")
	}
	if digestCapable(&memberlist.Node{Name: "none"}) {
		t.Fatal("a node without metadata counts as reading digests")
	}
}

// TestShortEnvelopeSize pins why digest requests use shortEnvelope: one
// must stay far below a book request of the same Cluster, and decode as
// the envelope it was.
func TestShortEnvelopeSize(t *testing.T) {
	book := crdt.Book{}
	for _, s := range []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"} {
		book.Add(s, 1, 2000)
	}
	e := envelope{Kind: msgSyncDigest, From: "0123456789abcdef0123456789abcdef", Digest: book.Digest()}
	b, err := encodeEnvelope(e)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 160 {
		t.Fatalf("a digest request is %d bytes, want at most 160", len(b))
	}
	got, err := decodeEnvelope(b)
	if err != nil || got.Kind != e.Kind || got.From != e.From || !bytes.Equal(got.Digest, e.Digest) || got.Book != nil || got.Changesets != nil {
		t.Fatalf("decoded %+v (%v), want %+v", got, err, e)
	}
}
