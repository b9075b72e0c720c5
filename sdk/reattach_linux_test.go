package sdk

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestWaitExitSleeps: on Linux the wait is a pidfd, not a poll: waitExit
// itself reports that it waited.
func TestWaitExitSleeps(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(200 * time.Millisecond); cmd.Process.Kill(); cmd.Wait() }()
	waited, err := waitExit(context.Background(), cmd.Process.Pid, make(chan struct{}))
	if !waited || err != nil {
		t.Fatalf("waitExit = %v, %v; want a pidfd wait that saw the exit", waited, err)
	}
}
