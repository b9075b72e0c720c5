package proxy

import (
	"bytes"
	"strings"
	"testing"
)

// TestFrameEdge: frames of each length encoding, masked or not, fed a
// byte at a time, are on a boundary only between frames.
func TestFrameEdge(t *testing.T) {
	var stream bytes.Buffer
	var ends []int
	for i, n := range []int{0, 5, 125, 126, 300, 70000} {
		writeFrame(&stream, 0x2, []byte(strings.Repeat("x", n)), i%2 == 0)
		ends = append(ends, stream.Len())
	}
	var f frameEdge
	at := map[int]bool{}
	for _, e := range ends {
		at[e] = true
	}
	for i, b := range stream.Bytes() {
		f.feed([]byte{b})
		if got := f.atBoundary(); got != at[i+1] {
			t.Fatalf("after byte %d: boundary %v, want %v", i+1, got, at[i+1])
		}
	}
	var whole frameEdge
	whole.feed(stream.Bytes()[:ends[3]+1])
	if whole.atBoundary() {
		t.Fatal("one byte into a frame reads as a boundary")
	}
	if c := closeFrame(wsGoingAway, false); !bytes.Equal(c, []byte{0x88, 2, 0x03, 0xe9}) {
		t.Fatalf("close frame %x", c)
	}
}
