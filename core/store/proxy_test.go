package store

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP to a target and can sever every open connection,
// simulating a network drop between client and server.
type cutProxy struct {
	ln       net.Listener
	target   string
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.accepted++
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestSubscriptionResumesAfterNetworkDrop severs the client's connection
// while changes keep coming, and checks the client resumes with no gap and
// no duplicate.
func TestSubscriptionResumesAfterNetworkDrop(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	direct := srv.client()
	p := newCutProxy(t, srv.cfg.APIAddr)
	viaProxy := New(p.ln.Addr().String(), WithToken("tok"))
	sub, err := viaProxy.Subscribe(ctx, Stmt(`SELECT id, body FROM volumes`), SubscribeOptions{SkipRows: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if ev := next(t, sub); ev.Kind != EventEOQ {
		t.Fatalf("want eoq, got %+v", ev)
	}
	for i := 1; i <= 30; i++ {
		if _, err := direct.Exec(ctx, Stmt(`INSERT INTO volumes (id, body) VALUES (?, '{}')`, "v"+string(rune('a'+i%26))+string(rune('0'+i/26)))); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			p.cut() // drop mid-stream; writes continue on the direct client
		}
	}
	for want := int64(1); want <= 30; want++ {
		ev := next(t, sub)
		if ev.Kind != EventChange || ev.ChangeID != want || ev.ChangeKind != "insert" {
			t.Fatalf("event %+v, want insert with change id %d", ev, want)
		}
	}
	noEvent(t, sub)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.accepted < 2 {
		t.Fatalf("client never reconnected (%d connections)", p.accepted)
	}
}
