package containers

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// frame is one Docker multiplexed log frame.
func frame(stream byte, payload []byte) []byte {
	h := make([]byte, 8, 8+len(payload))
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

// FuzzScanLogs reads arbitrary bytes as a Container's log stream, with
// and without a TTY, as a broken or hostile Docker could send them.
// Properties: no panic; every line is stdout or stderr, holds no newline
// and at most maxLogLine bytes; the lines hold no more text than the
// stream did (nothing is invented, a huge size in a header allocates
// nothing it was not sent).
func FuzzScanLogs(f *testing.F) {
	f.Add(append(frame(1, []byte("2026-01-02T03:04:05.000000006Z hello\n")), frame(2, []byte("2026-01-02T03:04:05Z oops\r\n"))...), false)
	f.Add(frame(1, []byte("no newline at the end")), false)
	f.Add([]byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'x'}, false)
	f.Add(frame(0, []byte("stdin?\n")), false)
	f.Add(frame(3, []byte("daemon error\n")), false)
	f.Add([]byte("2026-01-02T03:04:05Z tty line\r\nsecond\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, tty bool) {
		text := 0
		err := scanLogs(bytes.NewReader(data), tty, func(l rpc.LogLine) error {
			if l.Stream != "stdout" && l.Stream != "stderr" {
				t.Fatalf("line on stream %q", l.Stream)
			}
			if strings.Contains(l.Text, "\n") || len(l.Text) > maxLogLine {
				t.Fatalf("line of %d bytes with a newline or over the bound", len(l.Text))
			}
			text += len(l.Text)
			return nil
		})
		if text > len(data) {
			t.Fatalf("%d bytes of text from a %d-byte stream", text, len(data))
		}
		if err != nil && err.Error() == "" {
			t.Fatal("an error without a message")
		}
	})
}

// FuzzLogFrames builds a well-formed multiplexed stream from fuzzed
// lines, cut into frames at fuzzed sizes, and checks scanLogs gives back
// exactly those lines, streams and timestamps in order: a frame boundary
// inside a line, or several lines in one frame, changes nothing.
func FuzzLogFrames(f *testing.F) {
	f.Add([]byte("hello\nworld\r\n\nlast"), []byte{3, 1, 200}, uint64(0b101))
	f.Add([]byte("a\nb\nc\n"), []byte{1}, uint64(0))
	f.Fuzz(func(t *testing.T, text, cuts []byte, streams uint64) {
		ts := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
		type line struct{ stream, text string }
		var want []line
		var frames []byte
		byStream := map[byte][]byte{}
		for i, s := range strings.Split(string(text), "\n") {
			id := byte(1 + streams>>(i%64)&1)
			payload := ts.Format(time.RFC3339Nano) + " " + s + "\n"
			name := map[byte]string{1: "stdout", 2: "stderr"}[id]
			want = append(want, line{name, strings.TrimSuffix(s, "\r")})
			byStream[id] = append(byStream[id], payload...)
			// Flush this stream's bytes in frames cut at the fuzzed sizes,
			// leaving nothing pending, so lines keep their order.
			for c := 0; len(byStream[id]) > 0; c++ {
				n := len(byStream[id])
				if len(cuts) > 0 {
					n = min(n, 1+int(cuts[(i+c)%len(cuts)]))
				}
				frames = append(frames, frame(id, byStream[id][:n])...)
				byStream[id] = byStream[id][n:]
			}
		}
		var got []line
		err := scanLogs(bytes.NewReader(frames), false, func(l rpc.LogLine) error {
			if l.Time != ts.UnixNano() {
				t.Fatalf("line %q: time %d, want %d", l.Text, l.Time, ts.UnixNano())
			}
			got = append(got, line{l.Stream, l.Text})
			return nil
		})
		if err != nil {
			t.Fatalf("a well-formed stream: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d:\n got %q\nwant %q", len(got), len(want), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("line %d: %q, want %q", i, got[i], want[i])
			}
		}
	})
}

// TestScanLogsRefusesCorruptFrames: an unknown stream byte is an error,
// not stdout; a header promising more than maxLogLine is refused before
// any read; a payload cut short says so; the system-error stream's text
// becomes the error.
func TestScanLogsRefusesCorruptFrames(t *testing.T) {
	huge := []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	for name, tc := range map[string]struct {
		stream []byte
		want   string
	}{
		"unknown stream": {frame(7, []byte("x\n")), "stream 7"},
		"stdin stream":   {frame(0, []byte("x\n")), "stream 0"},
		"huge frame":     {huge, "exceeds"},
		"short payload":  {frame(1, []byte("abc"))[:9], "unexpected EOF"},
		"short header":   {[]byte{1, 0, 0}, "header"},
		"system error":   {frame(3, []byte("container gone\n")), "docker: container gone"},
	} {
		var lines []rpc.LogLine
		err := scanLogs(bytes.NewReader(tc.stream), false, func(l rpc.LogLine) error { lines = append(lines, l); return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", name, err, tc.want)
		}
		if len(lines) != 0 {
			t.Errorf("%s: emitted %+v", name, lines)
		}
	}
	// A line longer than the bound is handed on in pieces, never held whole.
	long := bytes.Repeat([]byte("y"), maxLogLine+10)
	var stream []byte
	for p := long; len(p) > 0; p = p[min(len(p), 64<<10):] {
		stream = append(stream, frame(1, p[:min(len(p), 64<<10)])...)
	}
	var sizes []int
	if err := scanLogs(bytes.NewReader(stream), false, func(l rpc.LogLine) error { sizes = append(sizes, len(l.Text)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 2 || sizes[0] != maxLogLine || sizes[1] != 10 {
		t.Fatalf("a %d-byte line came out as pieces of %v", len(long), sizes)
	}
}
