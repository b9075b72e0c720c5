package zfsvol

import (
	"bytes"
	"io"
	"reflect"
	"testing"
	"time"

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

// TestPruneCommands pins the zfs commands a prune and a send from a
// bookmark run: the bookmark is taken before the snapshot goes, and an
// incremental base is the full name zfs send -i takes (@ or #).
func TestPruneCommands(t *testing.T) {
	got := destroyCommands("tank/ployz/volumes/db", "run-3", true)
	want := [][]string{
		{"bookmark", "tank/ployz/volumes/db@run-3", "tank/ployz/volumes/db#run-3"},
		{"destroy", "tank/ployz/volumes/db@run-3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("destroyCommands(mark) = %q, want %q", got, want)
	}
	if got := destroyCommands("tank/ployz/volumes/db", "run-3", false); len(got) != 1 || got[0][0] != "destroy" {
		t.Errorf("destroyCommands(no mark) = %q", got)
	}
	for _, c := range []struct {
		base string
		want []string
	}{
		{"", []string{"send", "-p", "tank/v@run-5"}},
		{"@run-4", []string{"send", "-i", "tank/v@run-4", "tank/v@run-5"}},
		{"#run-2", []string{"send", "-i", "tank/v#run-2", "tank/v@run-5"}},
	} {
		if got := sendCommand("tank/v", "run-5", c.base); !reflect.DeepEqual(got, c.want) {
			t.Errorf("sendCommand(base %q) = %q, want %q", c.base, got, c.want)
		}
	}
}

// TestParsePoints reads zfs list lines of bookmarks and snapshots alike:
// the name after # or @, the creation time, the properties asked for.
func TestParsePoints(t *testing.T) {
	got := parsePoints([][]string{
		{"tank/ployz/volumes/db#run-1", "1700000000", "123"},
		{"tank/ployz/volumes/db@run-2", "1700000001", "456"},
		{"tank/ployz/volumes/db", "1700000001", "789"}, // neither
		{"short"},
	}, 1)
	want := []point{{name: "run-1", created: 1700000000 * int64(time.Second), props: []string{"123"}},
		{name: "run-2", created: 1700000001 * int64(time.Second), props: []string{"456"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsePoints = %+v, want %+v", got, want)
	}
}
