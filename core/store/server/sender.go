package server

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// peerQueue bounds how many messages may wait for one slow peer; beyond it
// messages are dropped and anti-entropy repairs the gap later.
const peerQueue = 256

type outMsg struct {
	node     *memberlist.Node
	msg      []byte
	reliable bool
	answer   bool // part of a sync answer (peerOut.answering)
	book     bool // a sync request carrying the whole book
}

// peerOut is one peer's queue. request holds the newest sync request
// only, sent ahead of the queue: behind a backlog of changes a request
// would arrive describing a book long since filled, and be answered with
// versions the peer holds already. answering counts the sync answer
// messages queued or being sent to it.
type peerOut struct {
	ch        chan outMsg
	request   chan outMsg
	answering atomic.Int32
}

// senders gives every peer its own queue and goroutine, so a peer that is
// slow or unreachable (a TCP dial can take the whole TCP timeout) never
// delays messages to the others, nor the loops that produce them, nor Close.
type senders struct {
	n  *Node
	mu sync.Mutex
	q  map[string]*peerOut
}

func (s *senders) send(node *memberlist.Node, msg []byte, reliable bool) {
	s.enqueue(outMsg{node: node, msg: msg, reliable: reliable})
}

// sendRequest puts a sync request in the peer's request slot, replacing
// one still waiting there, except that a digest never replaces a book:
// the peer asked for the book (msgSyncWant) and would only ask again.
func (s *senders) sendRequest(node *memberlist.Node, msg []byte, reliable, book bool) {
	p := s.peer(node.Name)
	m := outMsg{node: node, msg: msg, reliable: reliable, book: book}
	for {
		select {
		case p.request <- m:
			return
		default:
		}
		select {
		case old := <-p.request:
			if old.book && !m.book {
				m = old
			}
		default:
		}
	}
}

// sendAnswer queues one message of a sync answer (always reliable).
func (s *senders) sendAnswer(node *memberlist.Node, msg []byte) {
	s.enqueue(outMsg{node: node, msg: msg, reliable: true, answer: true})
}

// answering reports whether an earlier sync answer to the peer is still
// queued or on its way.
func (s *senders) answering(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.q[name]
	return p != nil && p.answering.Load() > 0
}

// peer returns the peer's queue, starting its sender on first use.
func (s *senders) peer(name string) *peerOut {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q == nil {
		s.q = map[string]*peerOut{}
	}
	p := s.q[name]
	if p == nil {
		p = &peerOut{ch: make(chan outMsg, peerQueue), request: make(chan outMsg, 1)}
		s.q[name] = p
		go s.run(p)
	}
	return p
}

func (s *senders) enqueue(m outMsg) {
	p := s.peer(m.node.Name)
	if m.answer {
		p.answering.Add(1)
	}
	select {
	case p.ch <- m:
	default:
		if m.answer {
			p.answering.Add(-1)
		}
		s.n.log.Debug("peer queue full, dropping message", "peer", m.node.Name)
	}
}

// run sends the peer's messages in order, a waiting sync request first.
func (s *senders) run(p *peerOut) {
	for {
		var m outMsg
		select {
		case m = <-p.request:
		default:
			select {
			case <-s.n.stop:
				return
			case m = <-p.request:
			case m = <-p.ch:
			}
		}
		if err := s.n.gsp.Send(m.node, m.msg, m.reliable); err != nil {
			s.n.log.Debug("send to peer", "peer", m.node.Name, "error", err)
		}
		if m.answer {
			p.answering.Add(-1)
		}
	}
}
