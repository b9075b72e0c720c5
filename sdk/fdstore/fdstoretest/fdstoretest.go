// Package fdstoretest stands in for systemd in tests of code that
// notifies it (sd_notify) or parks sockets in its fd store: a real
// unixgram socket at $NOTIFY_SOCKET that receives each notification with
// the fds it carries.
package fdstoretest

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Manager is the service manager's end of $NOTIFY_SOCKET.
type Manager struct {
	t    testing.TB
	conn *net.UnixConn
}

// NewManager listens in a temporary directory and points NOTIFY_SOCKET
// at it for the rest of the test.
func NewManager(t testing.TB) *Manager {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Net: "unixgram", Name: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return &Manager{t: t, conn: c}
}

// Next returns the next notification and the fds it carried, which the
// caller closes (as systemd does when it drops them); ok is false when
// none arrives within wait.
func (m *Manager) Next(wait time.Duration) (state string, fds []int, ok bool) {
	m.t.Helper()
	buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4*16))
	_ = m.conn.SetReadDeadline(time.Now().Add(wait))
	n, oobn, _, _, err := m.conn.ReadMsgUnix(buf, oob)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return "", nil, false
	}
	if err != nil {
		m.t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		m.t.Fatal(err)
	}
	for i := range msgs {
		if r, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, r...)
		}
	}
	return string(buf[:n]), fds, true
}

// Expect fails the test unless the next notification, within 5 s, is
// state carrying n fds, and returns them.
func (m *Manager) Expect(state string, n int) []int {
	m.t.Helper()
	got, fds, ok := m.Next(5 * time.Second)
	if !ok || got != state || len(fds) != n {
		m.t.Fatalf("notification %q with %d fds (received: %v), want %q with %d", got, len(fds), ok, state, n)
	}
	return fds
}

// None fails the test if a notification arrives within 300 ms.
func (m *Manager) None() {
	m.t.Helper()
	if got, fds, ok := m.Next(300 * time.Millisecond); ok {
		m.t.Fatalf("unexpected notification %q with %d fds", got, len(fds))
	}
}
