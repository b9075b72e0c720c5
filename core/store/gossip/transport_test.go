package gossip

import (
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"golang.org/x/sys/unix"
)

// fakeStore stands in for systemd's fd store: it sets NOTIFY_SOCKET and
// keeps every fd a notification carries, as systemd does until the unit
// stops, counting the sockets parked.
func fakeStore(t *testing.T) (parked func() int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Net: "unixgram", Name: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", path)
	var mu sync.Mutex
	var fds []int
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4*8))
		for {
			_, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for i := range msgs {
				r, _ := unix.ParseUnixRights(&msgs[i])
				mu.Lock()
				fds = append(fds, r...)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		c.Close()
		<-done
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(fds)
	}
}

// TestKeptGossipSocketsOutliveAStop: a member started with KeepAs under a
// service manager parks its TCP and UDP sockets; once it shuts down
// nobody else can bind its port, and what a peer sends meanwhile (a
// packet, a stream) waits in the kept sockets for the member started
// next on the same address, which takes them over instead of binding.
func TestKeptGossipSocketsOutliveAStop(t *testing.T) {
	parked := fakeStore(t)
	port := freeGossipPort(t)
	bind := "127.0.0.1:" + strconv.Itoa(port)
	got := make(chan string, 4)
	cfg := Config{Name: "a", Bind: bind, Fast: fast, KeepAs: "test-gossip",
		OnMessage: func(m []byte) { got <- string(m) }}
	a, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "tcp and udp parked", func() bool { return parked() == 2 })
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
	if n := parked(); n != 2 {
		t.Fatalf("%d sockets parked in all; the restart should have taken the 2 kept ones", n)
	}
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
