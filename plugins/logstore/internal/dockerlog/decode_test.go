package dockerlog

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// render prints the records of one source as `docker logs -t` does: each
// record with its own timestamp, a newline only after a record that is not
// partial (so Docker glues the pieces of a split line, and the line after
// it, together).
func render(es []Entry, source string) string {
	var b strings.Builder
	for _, e := range es {
		if e.Source != source {
			continue
		}
		b.WriteString(time.Unix(0, e.TimeNano).UTC().Format("2006-01-02T15:04:05.000000000Z07:00"))
		b.WriteByte(' ')
		b.Write(e.Line)
		if !e.Partial {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func assemble(es []Entry) []Line {
	var a Assembler
	var lines []Line
	for _, e := range es {
		lines = append(lines, a.Add(e)...)
	}
	return append(lines, a.Flush()...)
}

// TestRealDockerFile reads a file the Docker installed here wrote
// (testdata/basic.log: stdout and stderr, an empty line, UTF-8, a 20000
// byte line Docker split in two records, and a last line without a
// newline) and checks every line against `docker logs -t` of the same
// Container.
func TestRealDockerFile(t *testing.T) {
	buf, err := os.ReadFile("testdata/basic.log")
	if err != nil {
		t.Fatal(err)
	}
	es, n, corrupt := Decode(buf, true)
	if corrupt != 0 || n != len(buf) {
		t.Fatalf("%d corrupt bytes, %d of %d consumed in a file Docker wrote", corrupt, n, len(buf))
	}
	for _, src := range []string{"stdout", "stderr"} {
		want, err := os.ReadFile("testdata/basic.docker-logs-" + src)
		if err != nil {
			t.Fatal(err)
		}
		if got := render(es, src); got != string(want) {
			t.Errorf("%s differs from docker logs:\n got %.300q\nwant %.300q", src, got, want)
		}
	}
	lines := assemble(es)
	want := []string{"to stderr", "hello stdout", "", "héllo ünïcode", strings.Repeat("x", 20000), "no-newline-at-end"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for i, l := range lines {
		if string(l.Text) != want[i] {
			t.Errorf("line %d = %.40q, want %.40q", i, l.Text, want[i])
		}
	}
}

// TestTruncatedFrame: a frame cut short waits for more bytes while the
// file may grow, and counts as corrupt once no more will come.
func TestTruncatedFrame(t *testing.T) {
	buf, _ := os.ReadFile("testdata/basic.log")
	cut := buf[:len(buf)-10]
	es, n, corrupt := Decode(cut, false)
	if corrupt != 0 || len(es) != 6 || n >= len(cut) {
		t.Fatalf("growing file: %d entries, consumed %d of %d, corrupt %d", len(es), n, len(cut), corrupt)
	}
	es, n, corrupt = Decode(cut, true)
	if len(es) != 6 || n != len(cut) || corrupt != len(cut)-frameEnd(t, cut, 6) {
		t.Fatalf("final file: %d entries, consumed %d, corrupt %d", len(es), n, corrupt)
	}
}

// frameEnd returns the offset after the first k frames.
func frameEnd(t *testing.T, buf []byte, k int) int {
	t.Helper()
	pos := 0
	for i := 0; i < k; i++ {
		size := int(buf[pos])<<24 | int(buf[pos+1])<<16 | int(buf[pos+2])<<8 | int(buf[pos+3])
		pos += 8 + size
	}
	return pos
}

// TestCorruptFramesAreSkippedAndCounted: garbage between frames, a frame
// whose trailer disagrees, and a frame whose message is not an entry are
// skipped byte for byte, counted, and every good frame around them reads.
func TestCorruptFramesAreSkippedAndCounted(t *testing.T) {
	good := func(s string, ts int64) []byte {
		return Encode(nil, Entry{Source: "stdout", TimeNano: ts, Line: []byte(s)})
	}
	garbage := []byte("\x00\x00\x00\x05hello world, not a frame")
	badTrailer := good("bad trailer", 2)
	badTrailer[len(badTrailer)-1] ^= 0xff
	notEntry := Encode(nil, Entry{Source: "stdin", TimeNano: 3, Line: []byte("x")})
	var buf []byte
	buf = append(buf, good("one", 1)...)
	buf = append(buf, garbage...)
	buf = append(buf, badTrailer...)
	buf = append(buf, notEntry...)
	buf = append(buf, good("two", 4)...)
	es, n, corrupt := Decode(buf, true)
	if n != len(buf) {
		t.Fatalf("consumed %d of %d", n, len(buf))
	}
	if len(es) != 2 || string(es[0].Line) != "one" || string(es[1].Line) != "two" {
		t.Fatalf("entries %+v", es)
	}
	if want := len(garbage) + len(badTrailer) + len(notEntry); corrupt != want {
		t.Fatalf("corrupt = %d, want %d", corrupt, want)
	}
}

// TestUnknownFieldsAreIgnored: a newer Docker may add fields.
func TestUnknownFieldsAreIgnored(t *testing.T) {
	f := Encode(nil, Entry{Source: "stderr", TimeNano: 7, Line: []byte("x")})
	size := len(f) - 8
	msg := append(append([]byte(nil), f[4:4+size]...), 0x50, 0x01) // field 10, varint 1
	var buf []byte
	buf = append(buf, 0, 0, 0, byte(len(msg)))
	buf = append(buf, msg...)
	buf = append(buf, 0, 0, 0, byte(len(msg)))
	es, _, corrupt := Decode(buf, true)
	if corrupt != 0 || len(es) != 1 || es[0].Source != "stderr" || !bytes.Equal(es[0].Line, []byte("x")) {
		t.Fatalf("entries %+v corrupt %d", es, corrupt)
	}
}

// TestOverlongLineIsHandedOnInPieces: a partial line never ends; the
// assembler bounds what it holds.
func TestOverlongLineIsHandedOnInPieces(t *testing.T) {
	var a Assembler
	chunk := bytes.Repeat([]byte("y"), 16384)
	total := 0
	for i := 0; i < 70; i++ {
		for _, l := range a.Add(Entry{Source: "stdout", TimeNano: 1, Line: chunk, Partial: true}) {
			if len(l.Text) != MaxLine {
				t.Fatalf("piece of %d bytes", len(l.Text))
			}
			total += len(l.Text)
		}
	}
	for _, l := range a.Flush() {
		total += len(l.Text)
	}
	if total != 70*16384 {
		t.Fatalf("handed on %d bytes, want %d", total, 70*16384)
	}
}
