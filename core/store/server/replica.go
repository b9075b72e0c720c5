package server

import (
	"context"
	"math/rand"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/ployz/ployz/core/store/crdt"
)

// udpLimit keeps best-effort pushes inside one UDP packet; larger pushes
// go over a TCP stream.
const udpLimit = 1200

// syncChunk bounds how many versions one sync answer reads at a time.
const syncChunk = 256

// maxSyncSkips bounds how many sync rounds in a row a node skips while
// changes it received wait to be applied.
const maxSyncSkips = 5

func (n *Node) onMessage(b []byte) {
	env, err := decodeEnvelope(b)
	if err != nil {
		n.log.Debug("dropping peer message", "error", err)
		return
	}
	switch env.Kind {
	case msgChanges:
		select {
		case n.applyCh <- env.Changesets:
		default: // overloaded: anti-entropy will pull these again
		}
	case msgSyncReq, msgSyncDigest, msgSyncWant:
		n.syncReqs.put(env)
	}
}

// broadcastLoop pushes local changesets to every live member, batching
// whatever queued up while the previous push was in flight.
func (n *Node) broadcastLoop() {
	defer n.wg.Done()
	for {
		var batch []crdt.Changeset
		select {
		case <-n.stop:
			return
		case cs := <-n.outCh:
			batch = append(batch, cs)
		}
	drain:
		for len(batch) < 64 {
			select {
			case cs := <-n.outCh:
				batch = append(batch, cs)
			default:
				break drain
			}
		}
		var top int64
		for _, cs := range batch {
			top = max(top, cs.LastVersion, cs.Version)
		}
		// The mark must be durable before any peer can hold these
		// versions, or power loss here could hand them out again.
		if err := n.eng.MarkShared(top); err != nil {
			n.log.Error("persist version mark; not broadcasting (peers pull later)", "error", err)
			continue
		}
		msg, err := encodeEnvelope(envelope{Kind: msgChanges, From: n.eng.Site(), Changesets: batch})
		if err != nil {
			n.log.Error("encode broadcast", "error", err)
			continue
		}
		for _, m := range n.gsp.Alive() {
			n.sent.broadcast.Add(int64(len(msg)))
			n.out.send(m, msg, len(msg) > udpLimit)
		}
	}
}

func (n *Node) applyLoop() {
	defer n.wg.Done()
	for {
		var batch []crdt.Changeset
		select {
		case <-n.stop:
			return
		case css := <-n.applyCh:
			batch = append(batch, css...)
		}
	drain:
		for len(batch) < 512 {
			select {
			case css := <-n.applyCh:
				batch = append(batch, css...)
			default:
				break drain
			}
		}
		if _, err := n.eng.Apply(context.Background(), batch); err != nil {
			n.log.Error("apply peer changes", "error", err)
		}
	}
}

// syncLoop answers sync requests and, on a timer, asks a few random live
// peers for what this node lacks (anti-entropy).
func (n *Node) syncLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.syncReqs.ready:
			for _, r := range n.syncReqs.take() {
				n.handleSync(r)
			}
		case <-t.C:
			n.requestSync()
		}
	}
}

func (n *Node) requestSync() {
	// Changes received but not applied yet are missing from the book: a
	// request now would ask every peer for them again. A few rounds at
	// most, so a node that never drains its backlog still repairs gaps.
	if len(n.applyCh) > 0 && n.syncSkips < maxSyncSkips {
		n.syncSkips++
		return
	}
	n.syncSkips = 0
	peers := n.gsp.Alive()
	rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	if len(peers) > 3 {
		peers = peers[:3]
	}
	if len(peers) == 0 {
		return
	}
	book := n.eng.Book()
	var full, digest []byte
	for _, p := range peers {
		msg := &full
		if digestCapable(p) {
			msg = &digest
		}
		if *msg == nil {
			var err error
			if *msg, err = n.syncRequest(book, msg == &digest); err != nil {
				n.log.Error("encode sync request", "error", err)
				return
			}
		}
		n.sendSyncRequest(p, *msg, msg == &full)
	}
}

// sendSyncRequest sends a sync request (a book, a digest) to one peer.
// One that fits a packet goes best-effort: one is sent every SyncInterval
// anyway, and a TCP connection per peer per round was most of what an
// idle store spent.
func (n *Node) sendSyncRequest(p *memberlist.Node, msg []byte, book bool) {
	n.sent.syncRequests.Add(int64(len(msg)))
	n.out.sendRequest(p, msg, len(msg) > udpLimit, book)
}

// answerSync streams to the requester every version this node holds that
// the requester's book lacks, with overwritten versions as cleared ranges.
func (n *Node) answerSync(req envelope) {
	peer := n.gsp.Member(req.From)
	if peer == nil {
		return
	}
	// While the last answer to this peer is still queued, the request
	// predates it: answering would send the same versions again, and
	// each duplicate delays the next request further behind it (a storm
	// measured at 30 nodes: tens of KB/s per node long after the writes
	// stopped). The peer asks again within a sync interval.
	if n.out.answering(peer.Name) {
		return
	}
	mine := n.servable()
	budget := 8 * syncChunk // versions per answer; the next round continues
	for site := range mine {
		for _, r := range req.Book.Missing(mine, site) {
			for lo := r.Lo; lo <= r.Hi && budget > 0; lo += syncChunk {
				hi := min(lo+syncChunk-1, r.Hi)
				budget -= int(hi - lo + 1)
				css, err := n.eng.ChangesFor(context.Background(), site, lo, hi)
				if err != nil {
					n.log.Error("read versions for sync", "site", site, "lo", lo, "hi", hi, "error", err)
					return
				}
				msg, err := encodeEnvelope(envelope{Kind: msgChanges, From: n.eng.Site(), Changesets: css})
				if err != nil {
					n.log.Error("encode sync answer", "error", err)
					return
				}
				n.sent.syncAnswers.Add(int64(len(msg)))
				n.out.sendAnswer(peer, msg)
			}
		}
	}
}
