package dns

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// TestSocketsParkedInFDStore: freshly bound sockets are sent to
// $NOTIFY_SOCKET with FDSTORE=1 and their names, as systemd expects.
func TestSocketsParkedInFDStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	nl, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("LISTEN_FDS", "")
	listen := netip.MustParseAddrPort(freeAddr(t, "udp4"))
	s, err := TakeSockets(listen, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Parking must leave this process's sockets non-blocking, or reads
	// ignore deadlines and a stopping server hangs.
	for _, c := range []any{s.UDP, s.TCP} {
		rc, _ := c.(interface {
			SyscallConn() (syscall.RawConn, error)
		}).SyscallConn()
		rc.Control(func(fd uintptr) {
			fl, _ := unix.FcntlInt(fd, unix.F_GETFL, 0)
			if fl&unix.O_NONBLOCK == 0 {
				t.Errorf("%T is blocking after parking", c)
			}
		})
	}
	got := map[string]bool{}
	buf, oob := make([]byte, 512), make([]byte, 512)
	for len(got) < 2 {
		n, oobn, _, _, err := nl.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:n]) == "FDSTOREREMOVE=1\nFDNAME="+FDNameUDP || string(buf[:n]) == "FDSTOREREMOVE=1\nFDNAME="+FDNameTCP {
			continue // a stale stored socket is dropped before a new one is parked
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		if len(msgs) != 1 {
			t.Fatalf("%q came without a file descriptor", buf[:n])
		}
		fds, _ := unix.ParseUnixRights(&msgs[0])
		f := os.NewFile(uintptr(fds[0]), "parked")
		sa, _ := unix.Getsockname(int(f.Fd()))
		if sa.(*unix.SockaddrInet4).Port != int(listen.Port()) {
			t.Fatalf("parked socket bound to %v", sa)
		}
		f.Close()
		got[string(buf[:n])] = true
	}
	if !got["FDSTORE=1\nFDNAME="+FDNameUDP] || !got["FDSTORE=1\nFDNAME="+FDNameTCP] {
		t.Fatalf("notifications %v", got)
	}
}
