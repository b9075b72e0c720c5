package sdk

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestAttachedProcessWait: Wait returns when the process exits, when the
// host detaches and when ctx ends, and at once for a pid that is gone.
func TestAttachedProcessWait(t *testing.T) {
	start := func(t *testing.T) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	waitFor := func(t *testing.T, a *attachedProcess, ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() { done <- a.Wait(ctx) }()
		return done
	}
	expect := func(t *testing.T, done <-chan error, want error) {
		t.Helper()
		select {
		case err := <-done:
			if err != want {
				t.Fatalf("Wait = %v, want %v", err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Wait did not return")
		}
	}
	t.Run("exit", func(t *testing.T) {
		cmd := start(t)
		a := &attachedProcess{pid: cmd.Process.Pid, detached: make(chan struct{})}
		done := waitFor(t, a, context.Background())
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v while the process runs", err)
		case <-time.After(300 * time.Millisecond):
		}
		cmd.Process.Kill()
		cmd.Wait()
		expect(t, done, nil)
	})
	t.Run("detach", func(t *testing.T) {
		cmd := start(t)
		a := &attachedProcess{pid: cmd.Process.Pid, detached: make(chan struct{})}
		done := waitFor(t, a, context.Background())
		a.Kill(context.Background())
		expect(t, done, nil)
	})
	t.Run("ctx", func(t *testing.T) {
		cmd := start(t)
		a := &attachedProcess{pid: cmd.Process.Pid, detached: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		done := waitFor(t, a, ctx)
		cancel()
		expect(t, done, context.Canceled)
	})
	t.Run("gone", func(t *testing.T) {
		cmd := start(t)
		pid := cmd.Process.Pid
		cmd.Process.Kill()
		cmd.Wait()
		a := &attachedProcess{pid: pid, detached: make(chan struct{})}
		expect(t, waitFor(t, a, context.Background()), nil)
	})
}
