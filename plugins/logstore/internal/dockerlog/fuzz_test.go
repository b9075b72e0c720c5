package dockerlog

import (
	"os"
	"testing"
)

// FuzzDecode: any bytes decode without panicking, every byte is either in
// a frame or counted corrupt at EOF, and a growing file never consumes a
// frame it has not seen whole.
func FuzzDecode(f *testing.F) {
	if b, err := os.ReadFile("testdata/basic.log"); err == nil {
		f.Add(b)
	}
	f.Add(Encode(nil, Entry{Source: "stdout", TimeNano: 1, Line: []byte("a"), Partial: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, n, corrupt := Decode(b, true)
		if n != len(b) {
			t.Fatalf("consumed %d of %d at EOF", n, len(b))
		}
		framed := 0
		for _, e := range es {
			framed += len(Encode(nil, e))
		}
		if corrupt > n || corrupt < 0 {
			t.Fatalf("corrupt %d of %d", corrupt, n)
		}
		es2, n2, _ := Decode(b, false)
		if n2 > n || len(es2) > len(es) {
			t.Fatalf("growing read consumed %d (%d entries), final %d (%d)", n2, len(es2), n, len(es))
		}
		var a Assembler
		for _, e := range es {
			a.Add(e)
		}
		a.Flush()
	})
}
