package proxy

import (
	"bytes"
	"io"
	"net"
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

// TestRetiredClientTakesNoNewFrames: once a WebSocket is retired, the
// upstream's frames (its answer to the proxy's close frame) no longer
// reach the client, so the client's first close frame is the proxy's
// 1001; a frame already begun is finished first.
func TestRetiredClientTakesNoNewFrames(t *testing.T) {
	client, peer := net.Pipe()
	defer peer.Close()
	p := &wsPair{websocket: true}
	c := &clientConn{Conn: client, p: p}
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(peer); got <- b }()
	var frame bytes.Buffer
	writeFrame(&frame, 0x1, []byte("hello"), false)
	half := frame.Len() / 2
	if _, err := c.Write(frame.Bytes()[:half]); err != nil {
		t.Fatal(err)
	}
	p.closing = true
	if _, err := c.Write(frame.Bytes()[half:]); err != nil {
		t.Fatalf("the rest of a frame begun before the retirement: %v", err)
	}
	if _, err := c.Write(closeFrame(1000, false)); err == nil {
		t.Fatal("the upstream's close frame reached a retired client")
	}
	c.Close()
	want := append(frame.Bytes(), closeFrame(wsGoingAway, false)...)
	if b := <-got; !bytes.Equal(b, want) {
		t.Errorf("the client read %x, want the frame then the close frame 1001 %x", b, want)
	}
}
