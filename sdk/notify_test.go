package sdk

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/fdstore/fdstoretest"
)

// TestSDBarrierWaitsForSystemd: the barrier returns once the manager
// closes the pipe end it was sent, and fails when it never does.
func TestSDBarrierWaitsForSystemd(t *testing.T) {
	m := fdstoretest.NewManager(t)
	recv := func() (string, []int) {
		state, fds, ok := m.Next(5 * time.Second)
		if !ok {
			t.Fatal("no notification")
		}
		return state, fds
	}
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
