package fdstore

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ployz/ployz/sdk/fdstore/fdstoretest"
)

func inode(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func connInode(t *testing.T, c syscall.Conn) uint64 {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ino uint64
	if err := rc.Control(func(fd uintptr) { ino = inode(t, int(fd)) }); err != nil {
		t.Fatal(err)
	}
	return ino
}

// freePort returns a TCP and UDP port on 127.0.0.1 nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}); err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// TestListenTCPKeepsThePort: the socket bound under systemd goes into the
// fd store; while this process has closed its listener no one else can
// bind the port, a connection waits in the backlog, and listening again
// under the same name is the same socket, answering it. Forget hands the
// port back.
func TestListenTCPKeepsThePort(t *testing.T) {
	m := fdstoretest.NewManager(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	l, err := ListenTCP("test-rpc", addr)
	if err != nil {
		t.Fatal(err)
	}
	stored := m.Expect("FDSTORE=1\nFDNAME=test-rpc", 1)
	defer unix.Close(stored[0])
	ino := connInode(t, l)
	if got := inode(t, stored[0]); got != ino {
		t.Fatalf("the store got socket %d, the listener is %d", got, ino)
	}
	l.Close()

	if squat, err := net.Listen("tcp", addr); err == nil {
		squat.Close()
		t.Fatalf("%s was free after the listener closed: the kept socket does not hold it", addr)
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial while no listener accepts: %v", err)
	}
	defer c.Close()

	again, err := ListenTCP("test-rpc", addr)
	if err != nil {
		t.Fatal(err)
	}
	m.None() // already in the store
	if got := connInode(t, again); got != ino {
		t.Fatalf("listening again gave socket %d, want the kept %d", got, ino)
	}
	_ = again.SetDeadline(time.Now().Add(2 * time.Second))
	ac, err := again.Accept()
	if err != nil {
		t.Fatalf("the connection queued meanwhile was not accepted: %v", err)
	}
	ac.Close()
	if got := Held(); len(got) != 1 || got[0].Name != "test-rpc" {
		t.Fatalf("held %+v, want test-rpc", got)
	}

	Forget("test-rpc")
	m.Expect("FDSTOREREMOVE=1\nFDNAME=test-rpc", 0)
	again.Close()
	unix.Close(stored[0]) // systemd closes its copy on FDSTOREREMOVE
	free, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s still taken after Forget: %v", addr, err)
	}
	free.Close()
	if got := Held(); len(got) != 0 {
		t.Fatalf("held after Forget: %+v", got)
	}
}

// TestListenMovedAddress: a kept socket bound elsewhere is dropped from
// the store and a new one parked in its place.
func TestListenMovedAddress(t *testing.T) {
	m := fdstoretest.NewManager(t)
	first := "127.0.0.1:" + strconv.Itoa(freePort(t))
	l, err := ListenUDP("test-gossip", first)
	if err != nil {
		t.Fatal(err)
	}
	stored := m.Expect("FDSTORE=1\nFDNAME=test-gossip", 1)
	unix.Close(stored[0])
	l.Close()
	moved := "127.0.0.1:" + strconv.Itoa(freePort(t))
	l, err = ListenUDP("test-gossip", moved)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m.Expect("FDSTOREREMOVE=1\nFDNAME=test-gossip", 0)
	stored = m.Expect("FDSTORE=1\nFDNAME=test-gossip", 1)
	defer unix.Close(stored[0])
	if got := l.LocalAddr().String(); got != moved {
		t.Fatalf("listening on %s, want %s", got, moved)
	}
	if got, want := inode(t, stored[0]), connInode(t, l); got != want {
		t.Fatalf("the store got socket %d, the conn is %d", got, want)
	}
	Forget("test-gossip")
	m.Expect("FDSTOREREMOVE=1\nFDNAME=test-gossip", 0)
	if free, err := net.ListenPacket("udp", first); err != nil {
		t.Errorf("%s still taken after its socket moved: %v", first, err)
	} else {
		free.Close()
	}
}

// TestListenOutsideSystemd: without NOTIFY_SOCKET nothing is kept; closing
// the listener frees the port.
func TestListenOutsideSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	l, err := ListenTCP("test-plain", addr)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, h := range Held() {
		if h.Name == "test-plain" {
			t.Fatalf("held %+v outside systemd", h)
		}
	}
	free, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s taken after a plain listener closed: %v", addr, err)
	}
	free.Close()
}

// TestListenTakesPassedSockets: a process systemd restarts gets its kept
// sockets in LISTEN_FDS; ListenTCP and ListenUDP take them (same sockets,
// nothing parked again) and CloseUntaken drops a socket nothing serves.
// The passing is real: a child process is started with the sockets at
// fds 3.. and the LISTEN_ variables, as systemd starts a unit.
func TestListenTakesPassedSockets(t *testing.T) {
	m := fdstoretest.NewManager(t)
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	tl, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	ul, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	stale, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	var files []*os.File
	for _, c := range []interface{ File() (*os.File, error) }{tl, ul, stale} {
		f, err := c.File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPassedChild$", "-test.v")
	cmd.Env = append(os.Environ(), "FDSTORE_TEST_CHILD="+addr, "LISTEN_FDS=3", "LISTEN_FDNAMES=test-tcp:test-udp:test-stale")
	cmd.ExtraFiles = files
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := fmt.Sprintf("tcp %d udp %d", connInode(t, tl), connInode(t, ul))
	if !strings.Contains(string(out), want) {
		t.Fatalf("child listened on other sockets than it was passed (want %q):\n%s", want, out)
	}
	m.None() // both were in the store already
}

// TestPassedChild is TestListenTakesPassedSockets' child process.
func TestPassedChild(t *testing.T) {
	addr := os.Getenv("FDSTORE_TEST_CHILD")
	if addr == "" {
		return // only as the child
	}
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid())) // as systemd sets it
	Claim()
	tl, err := ListenTCP("test-tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ul, err := ListenUDP("test-udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	CloseUntaken()
	if f := Take("test-stale"); f != nil {
		t.Fatal("an untaken socket survived CloseUntaken")
	}
	fmt.Printf("tcp %d udp %d\n", connInode(t, tl), connInode(t, ul))
}
