package tarsafe

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// paxRecord is one PAX extended header record: its own length first.
func paxRecord(k, v string) string {
	s := " " + k + "=" + v + "\n"
	for digits := 1; ; digits++ {
		if n := len(s) + digits; len(fmt.Sprint(n)) == digits {
			return fmt.Sprint(n) + s
		}
	}
}

// SparseArchive is a 2.5 KB archive whose one entry, "big", archive/tar
// reads as 1 TiB of zeros (a PAX GNU sparse 0.1 file that is all hole).
// archive/tar writes no sparse files, so the PAX header is patched in.
func SparseArchive(tb testing.TB) []byte {
	tb.Helper()
	body := paxRecord("GNU.sparse.major", "0") + paxRecord("GNU.sparse.minor", "1") +
		paxRecord("GNU.sparse.numblocks", "1") + paxRecord("GNU.sparse.map", "0,0") +
		paxRecord("GNU.sparse.size", "1099511627776")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{{Name: "pax", Size: int64(len(body))}, {Name: "big"}} {
		h.Typeflag, h.Format, h.Mode = tar.TypeReg, tar.FormatUSTAR, 0o644
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(body)) // a bytes.Buffer
		}
	}
	tw.Close() // a bytes.Buffer
	b := buf.Bytes()
	b[156] = tar.TypeXHeader // the first header becomes the PAX header
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// TestNextRefusesSparse: archive/tar expands the sparse entry (the danger
// is real), and Next refuses it naming it, while plain entries pass.
// testdata/sparse.tar is SparseArchive's output, for the readers'
// tests in other packages.
func TestNextRefusesSparse(t *testing.T) {
	b := SparseArchive(t)
	if kept, err := os.ReadFile("testdata/sparse.tar"); err != nil || !bytes.Equal(kept, b) {
		t.Fatalf("testdata/sparse.tar is not SparseArchive's output (%v)", err)
	}
	tr := tar.NewReader(bytes.NewReader(b))
	h, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := io.CopyN(io.Discard, tr, 64<<20); n != 64<<20 || h.Size != 1<<40 {
		t.Fatalf("archive/tar read %d of a %d-byte entry from %d bytes: the fixture is not the expanding archive", n, h.Size, len(b))
	}
	_, err = Next(tar.NewReader(bytes.NewReader(b)))
	if err == nil || !strings.Contains(err.Error(), `"big"`) || !strings.Contains(err.Error(), "sparse") {
		t.Fatalf("Next: %v, want a refusal naming the sparse entry", err)
	}

	var plain bytes.Buffer
	tw := tar.NewWriter(&plain)
	tw.WriteHeader(&tar.Header{Name: "a", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644}) // a bytes.Buffer
	tw.Write([]byte("x"))
	tw.Close()
	tr = tar.NewReader(&plain)
	if h, err := Next(tr); err != nil || h.Name != "a" {
		t.Fatalf("plain entry: %v, %v", h, err)
	}
	if _, err := Next(tr); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}
