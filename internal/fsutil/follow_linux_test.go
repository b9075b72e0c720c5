package fsutil

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestFollowFile: a rename onto the file, an edit in place and a removal
// each call changed; a write to another file in the directory does not;
// the end of ctx ends the follow with true.
func TestFollowFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.json")
	var calls atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() { done <- FollowFile(ctx, path, func() { calls.Add(1) }) }()
	waitCalls(t, &calls, 1) // the call once the watch is set up
	if err := WriteFileAtomic(filepath.Join(dir, "other.json"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Fatalf("another file's write called changed: %d calls", n)
	}
	if err := WriteFileAtomic(path, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := waitCalls(t, &calls, 2)
	if err := os.WriteFile(path, []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	n = waitCalls(t, &calls, n+1)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, &calls, n+1)
	cancel()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("FollowFile returned false at ctx's end")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("FollowFile did not end with ctx")
	}
}

// TestFollowFileNoDirectory: a directory that does not exist is reported
// (false) for the caller to poll.
func TestFollowFileNoDirectory(t *testing.T) {
	if FollowFile(context.Background(), filepath.Join(t.TempDir(), "gone", "f"), func() {}) {
		t.Fatal("followed a file in a missing directory")
	}
}

// waitCalls waits up to a second for at least n calls and returns the count.
func waitCalls(t *testing.T, calls *atomic.Int64, n int64) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for calls.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("changed called %d times, want %d", calls.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return calls.Load()
}
