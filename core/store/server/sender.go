package server

import (
	"sync"

	"github.com/hashicorp/memberlist"
)

// peerQueue bounds how many messages may wait for one slow peer; beyond it
// messages are dropped and anti-entropy repairs the gap later.
const peerQueue = 256

type outMsg struct {
	node     *memberlist.Node
	msg      []byte
	reliable bool
}

// senders gives every peer its own queue and goroutine, so a peer that is
// slow or unreachable (a TCP dial can take the whole TCP timeout) never
// delays messages to the others, nor the loops that produce them, nor Close.
type senders struct {
	n  *Node
	mu sync.Mutex
	q  map[string]chan outMsg
}

func (s *senders) send(node *memberlist.Node, msg []byte, reliable bool) {
	s.mu.Lock()
	if s.q == nil {
		s.q = map[string]chan outMsg{}
	}
	ch := s.q[node.Name]
	if ch == nil {
		ch = make(chan outMsg, peerQueue)
		s.q[node.Name] = ch
		go s.run(ch)
	}
	s.mu.Unlock()
	select {
	case ch <- outMsg{node, msg, reliable}:
	default:
		s.n.log.Debug("peer queue full, dropping message", "peer", node.Name)
	}
}

func (s *senders) run(ch chan outMsg) {
	for {
		select {
		case <-s.n.stop:
			return
		case m := <-ch:
			if err := s.n.gsp.Send(m.node, m.msg, m.reliable); err != nil {
				s.n.log.Debug("send to peer", "peer", m.node.Name, "error", err)
			}
		}
	}
}
