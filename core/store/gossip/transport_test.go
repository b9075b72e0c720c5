package gossip

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"golang.org/x/sys/unix"

	"github.com/ployz/ployz/sdk/fdstore"
	"github.com/ployz/ployz/sdk/fdstore/fdstoretest"
)

// TestKeptGossipSocketsOutliveAStop: a member started with KeepAs under a
// service manager parks its TCP and UDP sockets; once it shuts down
// nobody else can bind its port, and what a peer sends meanwhile (a
// packet, a stream) waits in the kept sockets for the member started
// next on the same address, which takes them over instead of binding.
func TestKeptGossipSocketsOutliveAStop(t *testing.T) {
	m := fdstoretest.NewManager(t)
	t.Cleanup(func() { fdstore.Forget("test-gossip-tcp"); fdstore.Forget("test-gossip-udp") })
	port := freeGossipPort(t)
	bind := "127.0.0.1:" + strconv.Itoa(port)
	got := make(chan string, 4)
	cfg := Config{Name: "a", Bind: bind, Fast: fast, KeepAs: "test-gossip",
		OnMessage: func(m []byte) { got <- string(m) }}
	a, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// systemd's copies: they keep the sockets while no member runs.
	for _, fd := range append(m.Expect("FDSTORE=1\nFDNAME=test-gossip-tcp", 1), m.Expect("FDSTORE=1\nFDNAME=test-gossip-udp", 1)...) {
		defer unix.Close(fd)
	}
	b, err := Start(Config{Name: "b", Bind: "127.0.0.1:0", Fast: fast})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	a.Shutdown()

	if l, err := net.Listen("tcp", bind); err == nil {
		l.Close()
		t.Fatalf("tcp %s was free while the member was down", bind)
	}
	if c, err := net.ListenPacket("udp", bind); err == nil {
		c.Close()
		t.Fatalf("udp %s was free while the member was down", bind)
	}
	to := &memberlist.Node{Name: "a", Addr: net.IPv4(127, 0, 0, 1), Port: uint16(port)}
	if err := b.Send(to, []byte("packet while down"), false); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(to, []byte("stream while down"), true); err != nil {
		t.Fatalf("a stream to the kept port while the member is down: %v", err)
	}

	a, err = Start(cfg)
	if err != nil {
		t.Fatalf("restart on the kept sockets: %v", err)
	}
	defer a.Shutdown()
	want := map[string]bool{"packet while down": true, "stream while down": true}
	for len(want) > 0 {
		select {
		case m := <-got:
			delete(want, m)
		case <-time.After(5 * time.Second):
			t.Fatalf("not received after the restart: %v", want)
		}
	}
	m.None() // the restart took the kept sockets, parking nothing new
}

// freeGossipPort is a port free for both TCP and UDP on 127.0.0.1.
func freeGossipPort(t *testing.T) int {
	t.Helper()
	tl, ul, err := listenGossip("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	tl.Close()
	ul.Close()
	return tl.Addr().(*net.TCPAddr).Port
}
