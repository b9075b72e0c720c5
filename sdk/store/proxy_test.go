package store

import (
	"context"
	"io"
	"net"
	"reflect"
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
	p := newCutProxy(t, srv.API())
	viaProxy := New(p.ln.Addr().String(), WithToken("tok"))
	sub, err := viaProxy.Subscribe(ctx, Stmt(`SELECT id, body FROM volumes`), SubscribeOptions{SkipRows: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if ev := next(t, sub); ev.Kind != EventEOQ {
		t.Fatalf("want eoq, got %+v", ev)
	}
	insert := func(i int) {
		t.Helper()
		if _, err := direct.Exec(ctx, Stmt(`INSERT INTO volumes (id, body) VALUES (?, '{}')`, "v"+string(rune('a'+i%26))+string(rune('0'+i/26)))); err != nil {
			t.Fatal(err)
		}
	}
	insert(1)
	if ev := next(t, sub); ev.Kind != EventChange || ev.ChangeID != 1 {
		t.Fatalf("want change 1, got %+v", ev)
	}
	// (A cut before the first change is TestSubscriptionResumeBeforeFirstChange.)
	for i := 2; i <= 30; i++ {
		insert(i)
		if i%7 == 0 {
			p.cut() // drop mid-stream; writes continue on the direct client
		}
	}
	for want := int64(2); want <= 30; want++ {
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

// TestSubscriptionResumeBeforeFirstChange cuts the connection before any
// change: the resume (?from=0) gets a fresh snapshot, which the client
// turns into the changes since the snapshot it delivered — no row twice,
// none lost.
func TestSubscriptionResumeBeforeFirstChange(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	direct := srv.client()
	if _, err := direct.Exec(ctx, Stmt(`INSERT INTO volumes (id, body) VALUES ('a', '{}'), ('b', '{}')`)); err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, srv.API())
	viaProxy := New(p.ln.Addr().String(), WithToken("tok"))
	sub, err := viaProxy.Subscribe(ctx, Stmt(`SELECT id, body FROM volumes ORDER BY id`), SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for _, want := range []Event{{Kind: EventRow, RowID: 1, Values: []any{"a", "{}"}}, {Kind: EventRow, RowID: 2, Values: []any{"b", "{}"}}, {Kind: EventEOQ}} {
		if ev := next(t, sub); !reflect.DeepEqual(ev, want) {
			t.Fatalf("got %+v want %+v", ev, want)
		}
	}
	p.cut()
	for _, q := range []string{`UPDATE volumes SET body = '{"x":1}' WHERE id = 'a'`, `DELETE FROM volumes WHERE id = 'b'`, `INSERT INTO volumes (id, body) VALUES ('c', '{}')`} {
		if _, err := direct.Exec(ctx, Stmt(q)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]Event{}
	var last int64
	for len(got) < 3 {
		ev := next(t, sub)
		if ev.Kind != EventChange {
			t.Fatalf("after resume: %+v, want only changes", ev)
		}
		if ev.ChangeID < last {
			t.Fatalf("change id went back: %+v after %d", ev, last)
		}
		last = ev.ChangeID
		got[ev.ChangeKind] = Event{Kind: ev.Kind, ChangeKind: ev.ChangeKind, RowID: ev.RowID, Values: ev.Values}
	}
	want := map[string]Event{
		"update": {Kind: EventChange, ChangeKind: "update", RowID: 1, Values: []any{"a", `{"x":1}`}},
		"delete": {Kind: EventChange, ChangeKind: "delete", RowID: 2, Values: []any{"b", "{}"}},
		"insert": {Kind: EventChange, ChangeKind: "insert", RowID: 3, Values: []any{"c", "{}"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes after resume:\n got  %+v\n want %+v", got, want)
	}
	noEvent(t, sub)
	if sub.LastChangeID() != 3 {
		t.Fatalf("last change id %d, want 3", sub.LastChangeID())
	}
}
