package sdk

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeSystemd receives one notification on a unixgram socket and returns
// its text and the fds it carried.
func fakeSystemd(t *testing.T) (*net.UnixConn, func() (string, []int)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Net: "unixgram", Name: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return c, func() (string, []int) {
		buf, oob := make([]byte, 256), make([]byte, 256)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		var fds []int
		msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			r, _ := syscall.ParseUnixRights(&m)
			fds = append(fds, r...)
		}
		return string(buf[:n]), fds
	}
}

// TestSDBarrierWaitsForSystemd: the barrier returns once the manager
// closes the pipe end it was sent, and fails when it never does.
func TestSDBarrierWaitsForSystemd(t *testing.T) {
	_, recv := fakeSystemd(t)
	done := make(chan error, 1)
	go func() { done <- sdBarrier(5 * time.Second) }()
	state, fds := recv()
	if state != "BARRIER=1" || len(fds) != 1 {
		t.Fatalf("got %q with %d fds", state, len(fds))
	}
	select {
	case err := <-done:
		t.Fatalf("barrier returned before the manager closed the fd: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	syscall.Close(fds[0])
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	go func() { done <- sdBarrier(300 * time.Millisecond) }()
	_, fds = recv() // kept open: no answer
	if err := <-done; err == nil || !strings.Contains(err.Error(), "no barrier answer") {
		t.Fatalf("unanswered barrier: %v", err)
	}
	syscall.Close(fds[0])
}
