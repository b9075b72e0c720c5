package server

import (
	"fmt"
	"testing"

	"github.com/ployz/ployz/core/store/crdt"
)

// TestPendingSyncsKeepNewest checks that a busy node answers each peer's
// newest request once, in the order the peers first asked.
func TestPendingSyncsKeepNewest(t *testing.T) {
	p := pendingSyncs{ready: make(chan struct{}, 1)}
	req := func(from string, head int64) envelope {
		b := crdt.Book{}
		b.Add(from, 1, head)
		return envelope{Kind: msgSyncReq, From: from, Book: b}
	}
	p.put(req("a", 1))
	p.put(req("b", 1))
	p.put(req("a", 7))
	select {
	case <-p.ready:
	default:
		t.Fatal("no signal after put")
	}
	got := p.take()
	if len(got) != 2 || got[0].From != "a" || got[0].Book.Head("a") != 7 || got[1].From != "b" {
		t.Fatalf("take = %+v, want a's newest (head 7) then b", got)
	}
	if rest := p.take(); len(rest) != 0 {
		t.Fatalf("second take = %+v, want none", rest)
	}
	for i := 0; i < maxPendingSyncs+10; i++ {
		p.put(req(fmt.Sprint("peer", i), 1))
	}
	if n := len(p.take()); n != maxPendingSyncs {
		t.Fatalf("%d requests held, bound %d", n, maxPendingSyncs)
	}
}
