package server

import (
	"sync/atomic"

	"github.com/ployz/ployz/core/store/gossip"
)

// Traffic is what a node has sent since it started, in bytes.
type Traffic struct {
	// Wire is every byte on the gossip transport: SWIM and the store's
	// messages, framed and encrypted (gossip.Traffic).
	Wire gossip.Traffic `json:"wire"`
	// Broadcast, SyncRequests and SyncAnswers are the store's own
	// messages before gossip framing: changes pushed to every member,
	// anti-entropy requests (a digest of this node's version book; the
	// book itself to a peer that asks for it or reads no digest; asking a
	// peer for its book), and the changes sent in answer to a request.
	Broadcast    int64 `json:"broadcast"`
	SyncRequests int64 `json:"sync_requests"`
	SyncAnswers  int64 `json:"sync_answers"`
}

// Store is the bytes of the store's own messages.
func (t Traffic) Store() int64 { return t.Broadcast + t.SyncRequests + t.SyncAnswers }

// sentBytes counts the store's messages by kind as they are queued.
type sentBytes struct{ broadcast, syncRequests, syncAnswers atomic.Int64 }

// Traffic returns the bytes this node has sent so far; zero without gossip.
func (n *Node) Traffic() Traffic {
	t := Traffic{Broadcast: n.sent.broadcast.Load(), SyncRequests: n.sent.syncRequests.Load(), SyncAnswers: n.sent.syncAnswers.Load()}
	if n.gsp != nil {
		t.Wire = n.gsp.Traffic()
	}
	return t
}
