package server

import "sync"

// maxPendingSyncs bounds the peers with a waiting request; only members
// can send one (gossip is authenticated), so this is a backstop.
const maxPendingSyncs = 1024

// pendingSyncs holds the sync requests waiting for an answer, the newest
// per peer only (a want for this node's book is kept beside it): an older
// one describes a book the peer has since filled, and answering it would
// send versions the peer holds already. A busy node thus answers fresh
// requests however far behind it falls, and holds at most two messages
// per member.
type pendingSyncs struct {
	ready chan struct{} // signalled when a request is put; capacity 1
	mu    sync.Mutex
	by    map[string]envelope // by syncKey
	order []string            // keys in arrival order of their first waiting request
}

// syncKey is what a newer request replaces: a peer's request (book or
// digest), or its want for this node's book.
func syncKey(e envelope) string {
	if e.Kind == msgSyncWant {
		return e.From + "\x00want"
	}
	return e.From
}

func (p *pendingSyncs) put(req envelope) {
	p.mu.Lock()
	if p.by == nil {
		p.by = map[string]envelope{}
	}
	k := syncKey(req)
	if _, ok := p.by[k]; !ok {
		if len(p.order) >= maxPendingSyncs {
			p.mu.Unlock()
			return
		}
		p.order = append(p.order, k)
	}
	p.by[k] = req
	p.mu.Unlock()
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// take returns the waiting requests in arrival order and forgets them.
func (p *pendingSyncs) take() []envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]envelope, 0, len(p.order))
	for _, k := range p.order {
		out = append(out, p.by[k])
	}
	p.by, p.order = nil, nil
	return out
}
