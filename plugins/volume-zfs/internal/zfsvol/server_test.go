package zfsvol

import (
	"bytes"
	"io"
	"testing"

	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
)

// TestChunksRoundTrip cuts a stream into SendChunks and reads it back
// from ReceiveChunks (the header's data first), byte for byte.
func TestChunksRoundTrip(t *testing.T) {
	data := make([]byte, 3*chunkSize+17)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var sent [][]byte
	w := &chunkWriter{send: func(b []byte) error { sent = append(sent, bytes.Clone(b)); return nil }, buf: make([]byte, 0, chunkSize)}
	for off := 0; off < len(data); off += 1000 {
		if _, err := w.Write(data[off:min(off+1000, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 4 || len(sent[0]) != chunkSize || len(sent[3]) != 17 {
		t.Fatalf("chunks of %d, first %d, last %d", len(sent), len(sent[0]), len(sent[len(sent)-1]))
	}
	i := 1
	r := &chunkReader{cur: sent[0], recv: func() (*volumev1.ReceiveChunk, error) {
		if i == len(sent) {
			return nil, io.EOF
		}
		i++
		return &volumev1.ReceiveChunk{Data: sent[i-1]}, nil
	}}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want %d equal", len(got), err, len(data))
	}
}

func TestLayout(t *testing.T) {
	if got := dataset("tank", "db"); got != "tank/ployz/volumes/db" {
		t.Errorf("dataset = %s", got)
	}
	if got := Mountpoint("db"); got != "/var/lib/ployz/volumes/db" {
		t.Errorf("Mountpoint = %s", got)
	}
}
