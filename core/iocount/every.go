package iocount

import "time"

// Every calls report every d (every second when d is not positive) on
// its own goroutine until stop, which returns once report no longer
// runs, so the caller may write where report wrote.
func Every(d time.Duration, report func()) (stop func()) {
	if d <= 0 {
		d = time.Second
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				report()
			}
		}
	}()
	return func() { close(done); <-stopped }
}
