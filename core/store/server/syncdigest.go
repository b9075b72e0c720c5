package server

import (
	"bytes"
	"encoding/json"

	"github.com/hashicorp/memberlist"

	"github.com/ployz/ployz/core/store/crdt"
)

// A sync request used to carry the whole version book: about 40 bytes per
// member, so past about 30 members one TCP connection to each of three
// peers every second, in a Cluster at rest. Now a request to a peer that
// reads digests carries the book's digest only; a peer whose own book
// differs answers msgSyncWant, and the requester sends it the book.

// digestCapable reports whether the member's gossip metadata says it
// answers msgSyncDigest.
func digestCapable(p *memberlist.Node) bool {
	var m nodeMeta
	return json.Unmarshal(p.Meta, &m) == nil && m.SyncDigest
}

// syncRequest encodes a request carrying book, or only its digest.
func (n *Node) syncRequest(book crdt.Book, digest bool) ([]byte, error) {
	if digest {
		return encodeEnvelope(envelope{Kind: msgSyncDigest, From: n.eng.Site(), Digest: book.Digest()})
	}
	return encodeEnvelope(envelope{Kind: msgSyncReq, From: n.eng.Site(), Book: book})
}

// handleSync answers one waiting message of the sync protocol.
func (n *Node) handleSync(req envelope) {
	switch req.Kind {
	case msgSyncReq:
		n.answerSync(req)
	case msgSyncDigest:
		n.answerDigest(req)
	case msgSyncWant:
		n.sendBook(req.From)
	}
}

// answerDigest asks the requester for its book when the digest differs
// from the book this node would answer from; when they match, neither
// lacks anything the other may send.
func (n *Node) answerDigest(req envelope) {
	peer := n.gsp.Member(req.From)
	if peer == nil || n.out.answering(peer.Name) {
		return
	}
	if bytes.Equal(n.servable().Digest(), req.Digest) {
		return
	}
	msg, err := encodeEnvelope(envelope{Kind: msgSyncWant, From: n.eng.Site()})
	if err != nil {
		n.log.Error("encode sync want", "error", err)
		return
	}
	// Queued, not in the request slot: it must not replace this node's
	// own request to the peer.
	n.sent.syncRequests.Add(int64(len(msg)))
	n.out.send(peer, msg, false)
}

// sendBook sends this node's whole book to a peer that asked for it.
func (n *Node) sendBook(to string) {
	peer := n.gsp.Member(to)
	if peer == nil {
		return
	}
	msg, err := n.syncRequest(n.eng.Book(), false)
	if err != nil {
		n.log.Error("encode sync request", "error", err)
		return
	}
	n.sendSyncRequest(peer, msg, true)
}

// servable is the book of what this node may send a peer. Local versions
// leave only below the durable mark: raise it first (a broadcast may have
// been dropped), and serve none above it if that fails, or power loss
// could hand them out again.
func (n *Node) servable() crdt.Book {
	mine := n.eng.Book()
	if top := mine.Max(n.eng.Site()); top > n.eng.Shared() {
		if err := n.eng.MarkShared(top); err != nil {
			n.log.Error("persist version mark before a sync answer", "error", err)
		}
	}
	mine.Clip(n.eng.Site(), n.eng.Shared())
	return mine
}
