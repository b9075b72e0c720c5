package iocount

import (
	"io"
	"strings"
	"sync"
	"testing"
)

func TestReaderCountsWhileAnotherGoroutineReports(t *testing.T) {
	r := NewReader(io.LimitReader(strings.NewReader(strings.Repeat("x", 1<<20)), 1<<20))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a reporter reading N while the copy runs (-race checks it)
		defer wg.Done()
		for r.N() < 1<<20 {
		}
	}()
	n, err := io.Copy(io.Discard, r)
	wg.Wait()
	if err != nil || n != 1<<20 || r.N() != n {
		t.Fatalf("copied %d (%v), counted %d", n, err, r.N())
	}
}
