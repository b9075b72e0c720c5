package iocount

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestEveryReportsUntilStopped(t *testing.T) {
	var n atomic.Int64
	stop := Every(time.Millisecond, func() { n.Add(1) })
	for wait := time.Now().Add(5 * time.Second); n.Load() < 3 && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	stop()
	got := n.Load()
	time.Sleep(10 * time.Millisecond)
	if got < 3 || n.Load() != got {
		t.Fatalf("reported %d times, then %d after stop", got, n.Load())
	}
}
