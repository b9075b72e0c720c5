package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/ployz/ployz/internal/prereq"
)

// The pool's tests run an entry (a real Server forwarding over mutual
// TLS with MeshDialer) and one target Machine behind its real mesh
// listener at a fixed loopback address, which a test can restart (new
// listener, same address) with the same or another identity.

const (
	entryIP  = "127.0.0.3"
	targetIP = "127.0.0.2"
	targetID = "tttttttttttttttttttttttttttttttt"
	cmdWrite = "test_write" // stands for a command that changes something
)

type poolRig struct {
	t        *testing.T
	entryID  *Identity
	entry    *Server
	op       *Client
	peers    []Peer // the machines table both sides read; tests edit it
	mu       sync.Mutex
	receipts map[string]int // calls the target's handlers received, by command
	// onReceipt, when set, runs inside the target's handler after the
	// receipt is counted (a test kills the connection there).
	onReceipt func(cmd string, n int)

	target *poolTarget
	frozen *freezer
}

// poolTarget is one incarnation of the target Machine's listener.
type poolTarget struct {
	g     *grpc.Server
	mu    sync.Mutex
	conns []net.Conn // accepted, raw
}

func newPoolRig(t *testing.T) *poolRig {
	t.Helper()
	r := &poolRig{t: t, entryID: testIdentity(t), receipts: map[string]int{}, frozen: &freezer{}}
	t.Cleanup(r.frozen.thaw)
	entryPeer := Peer{ID: "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", Name: "entry", Address: entryIP + ":7569", RPCKey: r.entryID.PublicKey(), Phase: PhaseParticipating}
	r.peers = []Peer{entryPeer}
	list := func(context.Context) ([]Peer, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]Peer(nil), r.peers...), nil
	}
	d := MeshDialer{Identity: r.entryID, Source: netip.MustParseAddr(entryIP), wrap: r.frozen.wrap}
	r.entry = NewServer(Options{Local: func() (string, string) { return entryPeer.ID, entryPeer.Name }, Peers: list, Dial: d.Dial})
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := r.entry.GRPCServer()
	go g.Serve(l)
	t.Cleanup(g.Stop)
	if r.op, err = DialUnix(sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.op.Close() })
	return r
}

// start serves the target at addr ("" picks a port) with identity id and
// makes its row say so; it returns the address.
func (r *poolRig) start(addr string, id *Identity, publish bool) string {
	r.t.Helper()
	if addr == "" {
		addr = targetIP + ":0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		prereq.Missing(r.t, targetIP+" on the loopback (Linux routes 127/8 there)", err)
	}
	addr = l.Addr().String()
	if publish {
		r.setTarget(Peer{ID: targetID, Name: "target", Address: addr, RPCKey: id.PublicKey(), Phase: PhaseParticipating})
	}
	srv := NewServer(Options{Local: func() (string, string) { return targetID, "target" }, Peers: func(ctx context.Context) ([]Peer, error) {
		return r.entry.peers(ctx)
	}})
	for _, cmd := range []string{cmdWrite, CmdInspect} {
		srv.Handle(Route{Command: cmd, Capability: "ployz.test." + cmd + ".v1", Handler: func(context.Context, json.RawMessage) (any, error) {
			r.mu.Lock()
			r.receipts[cmd]++
			n, hook := r.receipts[cmd], r.onReceipt
			r.mu.Unlock()
			if hook != nil {
				hook(cmd, n)
			}
			return map[string]int{"receipt": n}, nil
		}})
	}
	pt := &poolTarget{g: srv.MeshServer(id)}
	go pt.g.Serve(&recordingListener{Listener: l, pt: pt})
	r.t.Cleanup(pt.g.Stop)
	r.target = pt
	return addr
}

// restart stops the target (its process ends: every connection closed)
// and serves it again at the same address with identity id.
func (r *poolRig) restart(id *Identity, publish bool) {
	r.t.Helper()
	r.target.g.Stop()
	r.start(r.targetPeer().Address, id, publish)
}

func (r *poolRig) setTarget(p Peer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.peers = append(r.peers[:1], p)
}

func (r *poolRig) targetPeer() Peer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peers[1]
}

func (r *poolRig) count(cmd string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.receipts[cmd]
}

// call runs cmd on the target through the entry, as the operator does.
func (r *poolRig) call(cmd string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.op.Call(ctx, Target{One: "target"}, cmd, nil, nil)
}

// kept is the entry's pooled Client for the target, or nil.
func (r *poolRig) kept() *Client {
	r.entry.pool.mu.Lock()
	defer r.entry.pool.mu.Unlock()
	if k := r.entry.pool.conns[targetID]; k != nil {
		return k.c
	}
	return nil
}

// killConns closes the target's accepted connections at the TCP level
// (no TLS close, no HTTP/2 GOAWAY), as a crashing process's kernel does.
func (pt *poolTarget) killConns() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for _, c := range pt.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST, as for a crash with unread data
		}
		c.Close()
	}
}

type recordingListener struct {
	net.Listener
	pt *poolTarget
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.pt.mu.Lock()
		l.pt.conns = append(l.pt.conns, c)
		l.pt.mu.Unlock()
	}
	return c, err
}

// freezer holds back what the entry's connections read while frozen, so
// a test can make the close of a connection arrive in the kernel before
// gRPC's reader has seen it: the window in which a kept connection looks
// alive to gRPC but is dead.
type freezer struct {
	mu     sync.Mutex
	frozen chan struct{} // closed to thaw; nil when not frozen
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen == nil {
		f.frozen = make(chan struct{})
	}
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen != nil {
		close(f.frozen)
		f.frozen = nil
	}
}

func (f *freezer) wrap(c net.Conn) net.Conn {
	return &freezableConn{Conn: c, tc: c.(*net.TCPConn), f: f, born: f.current()}
}

func (f *freezer) current() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

// freezableConn delivers reads only once its freezer thaws, unless it
// was dialed while frozen (a fresh connection is never held back).
type freezableConn struct {
	net.Conn
	tc   *net.TCPConn
	f    *freezer
	born chan struct{}
}

func (c *freezableConn) TCPConn() *net.TCPConn { return c.tc }

func (c *freezableConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if ch := c.f.current(); ch != nil && ch != c.born {
		<-ch
	}
	return n, err
}

// A Machine restarted between two calls (new listener, same identity and
// address): the second call is answered, no error reaching the caller,
// even though gRPC's reader had not yet seen the old connection close —
// the kept connection is checked before use, and a write is never sent
// on it. Each call ran exactly once.
func TestPeerPoolRestartedMachine(t *testing.T) {
	r := newPoolRig(t)
	id := testIdentity(t)
	r.start("", id, true)
	if err := r.call(cmdWrite); err != nil {
		t.Fatal(err)
	}
	first := r.kept()
	if first == nil {
		t.Fatal("the entry kept no connection to the target")
	}
	r.frozen.freeze() // the old connection's close stays unread by gRPC
	r.restart(id, false)
	done := make(chan error, 1)
	go func() { done <- r.call(cmdWrite) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("call after the restart: %v", err)
		}
	case <-time.After(5 * time.Second):
		r.frozen.thaw()
		t.Fatalf("call after the restart waited on the dead kept connection; then: %v", <-done)
	}
	r.frozen.thaw()
	if n := r.count(cmdWrite); n != 2 {
		t.Fatalf("the target received %d writes for 2 calls", n)
	}
	if r.kept() == first || !shutDown(first) {
		t.Fatal("the dead connection was kept")
	}
	// The new one is kept in turn: a third call dials nothing.
	second := r.kept()
	if err := r.call(cmdWrite); err != nil || r.kept() != second {
		t.Fatalf("third call: %v, kept connection replaced: %v", err, r.kept() != second)
	}
}

// A connection that dies after the request left (the Machine crashed
// mid-call) fails a write to the caller and never sends it again; a read
// is retried once on a fresh connection and answered.
func TestPeerPoolMidFlightFailure(t *testing.T) {
	r := newPoolRig(t)
	r.start("", testIdentity(t), true)
	if err := r.call(CmdInspect); err != nil { // the connection is now kept
		t.Fatal(err)
	}
	r.onReceipt = func(cmd string, n int) {
		if (cmd == cmdWrite && n == 1) || (cmd == CmdInspect && n == 2) {
			r.target.killConns()
		}
	}
	err := r.call(cmdWrite)
	if err == nil || !strings.Contains(err.Error(), "machine target") {
		t.Fatalf("write whose connection died mid-call = %v; want the failure", err)
	}
	var re *Error
	if !errors.As(err, &re) || re.Code != CodeUnavailable {
		t.Fatalf("write failure = %#v; want %s", err, CodeUnavailable)
	}
	time.Sleep(300 * time.Millisecond) // a retry would have landed by now
	if n := r.count(cmdWrite); n != 1 {
		t.Fatalf("the write was received %d times; a non-idempotent call must not be sent twice", n)
	}
	// The failed connection is not kept: the next write dials afresh.
	if err := r.call(cmdWrite); err != nil || r.count(cmdWrite) != 2 {
		t.Fatalf("next write: %v (received %d)", err, r.count(cmdWrite))
	}
	// A read dies the same way and is retried, once.
	if err := r.call(CmdInspect); err != nil {
		t.Fatalf("read whose connection died mid-call: %v; want it retried", err)
	}
	if n := r.count(CmdInspect); n != 3 {
		t.Fatalf("inspect received %d times; want 3 (warm-up, the failed try, its one retry)", n)
	}
}

// Authentication holds on kept and fresh connections alike: the target's
// admission runs on every call of a kept connection, and a Machine that
// answers at the row's address with another key than the row's is
// refused on the fresh dial, never served through the kept one.
func TestPeerPoolAuthentication(t *testing.T) {
	r := newPoolRig(t)
	id := testIdentity(t)
	r.start("", id, true)
	if err := r.call(cmdWrite); err != nil {
		t.Fatal(err)
	}
	kept := r.kept()

	// The target stops admitting the entry: the kept connection's next
	// call is refused by the target itself, and the connection dropped.
	defer func(d time.Duration) { authTTL = d }(authTTL)
	authTTL = 0
	r.mu.Lock()
	r.peers[0].Phase = "resetting"
	r.mu.Unlock()
	if err := r.call(cmdWrite); err == nil || !strings.Contains(err.Error(), "PermissionDenied") || !strings.Contains(err.Error(), `is "resetting", not participating`) {
		t.Fatalf("call on the kept connection after the target stopped admitting the entry = %v", err)
	}
	if r.kept() == kept || !shutDown(kept) {
		t.Fatal("a connection the target refused was kept (it may carry this Machine's old identity)")
	}
	r.mu.Lock()
	r.peers[0].Phase = PhaseParticipating
	r.mu.Unlock()

	// Another identity answers at the same address (the Machine was
	// replaced), the row unchanged: the kept connection is dead, and the
	// fresh one's handshake refuses the stranger.
	r.restart(testIdentity(t), false)
	err := r.call(cmdWrite)
	if err == nil || !strings.Contains(err.Error(), "machines row publishes") {
		t.Fatalf("call to a Machine answering with another key = %v", err)
	}
	if n := r.count(cmdWrite); n != 1 {
		t.Fatalf("writes received = %d; want only the first", n)
	}

	// The Machine with its published key is back: answered.
	r.restart(id, false)
	if err := r.call(cmdWrite); err != nil {
		t.Fatal(err)
	}

	// Its row moves to another address while the old listener still
	// answers: the kept connection, alive, is retired for the row.
	before := r.kept()
	r.start("", id, true)
	if err := r.call(cmdWrite); err != nil {
		t.Fatalf("call after the row's address changed: %v", err)
	}
	if r.kept() == before || !shutDown(before) {
		t.Fatal("the connection to the row's old address was kept")
	}

	// The Machine is reinstalled with a new key, which its row publishes:
	// the new key is verified on a fresh handshake and answered.
	before = r.kept()
	r.restart(testIdentity(t), true)
	if err := r.call(cmdWrite); err != nil {
		t.Fatalf("call after the row's key changed: %v", err)
	}
	if r.kept() == before {
		t.Fatal("the connection authenticated under the old key was kept")
	}
}

// A kept connection is closed once idle for the pool's idle time.
func TestPeerPoolIdleClose(t *testing.T) {
	r := newPoolRig(t)
	r.entry.pool.idle = 50 * time.Millisecond
	r.start("", testIdentity(t), true)
	if err := r.call(cmdWrite); err != nil {
		t.Fatal(err)
	}
	c := r.kept()
	deadline := time.Now().Add(5 * time.Second)
	for r.kept() != nil {
		if time.Now().After(deadline) {
			t.Fatal("idle connection still kept")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !shutDown(c) {
		t.Fatalf("idle connection not closed (state %v)", c.conn.GetState())
	}
}

// shutDown waits a little for c to be closed (the pool closes in the
// background) and reports whether it was.
func shutDown(c *Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for s := c.conn.GetState(); s != connectivity.Shutdown; s = c.conn.GetState() {
		if !c.conn.WaitForStateChange(ctx, s) {
			return false
		}
	}
	return true
}

// peerClosed sees a peer's close the moment the kernel has it.
func TestPeerClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() { c, _ := l.Accept(); accepted <- c }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	if peerClosed(c) {
		t.Fatal("an open connection reads as closed")
	}
	s.Close()
	deadline := time.Now().Add(2 * time.Second)
	for !peerClosed(c) {
		if time.Now().After(deadline) {
			t.Fatal("the peer's close was not seen")
		}
		time.Sleep(time.Millisecond)
	}
	var unixConn net.Conn = &net.UnixConn{}
	if peerClosed(unixConn) {
		t.Fatal("a non-TCP connection is not checked")
	}
}
