package rpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ployz/ployz/core/rpc/machinepb"
)

// wireStream is a grpcStream over bytes in gRPC's message framing (a
// flag byte, 0 for uncompressed; a 4-byte big-endian length; the Frame
// message), which grpc's transport parses before frameConn sees a frame.
// It refuses what the Machine RPC listener's grpc refuses: a compressed
// message (no compressor is registered) or one over MaxMessageBytes.
type wireStream struct {
	in, out []byte
}

func (w *wireStream) Recv() (*machinepb.Frame, error) {
	if len(w.in) == 0 {
		return nil, io.EOF
	}
	if len(w.in) < 5 {
		return nil, io.ErrUnexpectedEOF
	}
	if w.in[0] != 0 {
		return nil, fmt.Errorf("compressed flag %d: no compressor", w.in[0])
	}
	n := binary.BigEndian.Uint32(w.in[1:5])
	if n > MaxMessageBytes {
		return nil, fmt.Errorf("message of %d bytes exceeds %d", n, MaxMessageBytes)
	}
	if uint64(len(w.in)-5) < uint64(n) {
		return nil, io.ErrUnexpectedEOF
	}
	msg := w.in[5 : 5+n]
	w.in = w.in[5+n:]
	var m machinepb.Frame
	if err := proto.Unmarshal(msg, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

func (w *wireStream) Send(m *machinepb.Frame) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	w.out = append(w.out, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(w.out[len(w.out)-4:], uint32(len(b)))
	w.out = append(w.out, b...)
	return nil
}

// writeFrames is what the writer (frameConn.Send) puts on the wire for
// frames, with data raw or as base64 in the JSON.
func writeFrames(t testing.TB, frames []StreamFrame, raw bool) []byte {
	w := &wireStream{}
	c := frameConn{s: w, raw: raw}
	for _, f := range frames {
		if err := c.Send(f); err != nil {
			t.Fatalf("write %+v: %v", f, err)
		}
	}
	return w.out
}

// readFrames reads wire as a stream's frames, to its end or first error.
func readFrames(wire []byte) ([]StreamFrame, error) {
	c := frameConn{s: &wireStream{in: wire}}
	var out []StreamFrame
	for {
		f, err := c.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}

// uploadSeed is a volume stream as volumesend writes it to a target's
// receive_volume: a zfs send stream's first bytes in chunks, then EOF;
// and the target's answer, an event then Done.
func uploadSeed() (upload, answer []StreamFrame) {
	zfsBegin := append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xd4, 0x2b, 0x2f, 0x00, 0, 0, 0, 0, 0x11}, bytes.Repeat([]byte{0xa5}, 300)...)
	upload = []StreamFrame{{Data: zfsBegin[:17]}, {Data: zfsBegin[17:]}, {Data: []byte("tail")}, {EOF: true}}
	ev, _ := json.Marshal(VolumeTransfer{TargetID: "m-2", Bytes: 321, EstimatedBytes: 4096})
	answer = []StreamFrame{{Event: ev}, {Done: true}, {Error: Errorf(CodeUnavailable, "cut").With("machine_id", "m-2")}}
	return upload, answer
}

// FuzzVolumeStream reads arbitrary bytes as the frames of a volume
// stream between Machines (send_volume_to's upload to receive_volume, and
// its answer), as a broken or hostile peer could send them. Properties:
// no panic; the data read is never more than the bytes sent (a length
// promising more allocates nothing it was not sent); ReadUpload hands on
// exactly the non-empty data of the frames before the first EOF frame,
// and fails with ErrUploadCut when there is none; and what the writer
// writes for the frames read, raw or base64, reads back identically.
func FuzzVolumeStream(f *testing.F) {
	upload, answer := uploadSeed()
	for _, raw := range []bool{false, true} {
		f.Add(writeFrames(f, upload, raw))
		f.Add(writeFrames(f, answer, raw))
	}
	f.Add(writeFrames(f, upload, true)[:40])
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, wire []byte) {
		frames, readErr := readFrames(wire)
		total := 0
		var want [][]byte
		eof := false
		for _, fr := range frames {
			total += len(fr.Data)
			if fr.EOF && !eof {
				eof = true
			}
			if !eof && len(fr.Data) > 0 {
				want = append(want, fr.Data)
			}
		}
		if total > len(wire) {
			t.Fatalf("%d bytes of data from %d bytes of wire", total, len(wire))
		}
		checkUpload(t, wire, want, eof)
		if readErr != nil && readErr.Error() == "" {
			t.Fatal("an error without a message")
		}
		// The frames read, written again, read back the same.
		for _, raw := range []bool{false, true} {
			again, err := readFrames(writeFrames(t, frames, raw))
			if err != nil {
				t.Fatalf("raw %v: reading what the writer wrote: %v", raw, err)
			}
			if !sameFrames(again, frames) {
				t.Fatalf("raw %v: read back\n%+v\nwant\n%+v", raw, again, frames)
			}
		}
	})
}

// checkUpload: ReadUpload over wire hands on want, succeeding iff an EOF
// frame came.
func checkUpload(t *testing.T, wire []byte, want [][]byte, eof bool) {
	t.Helper()
	var got [][]byte
	err := ReadUpload(frameConn{s: &wireStream{in: wire}}, func(b []byte) error {
		got = append(got, b)
		return nil
	})
	if eof != (err == nil) {
		t.Fatalf("EOF frame %v, ReadUpload: %v", eof, err)
	}
	if err != nil && !errors.Is(err, ErrUploadCut) {
		t.Fatalf("ReadUpload failed without ErrUploadCut: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadUpload handed on %q, want %q", got, want)
	}
}

// sameFrames compares frames as a reader sees them: no data equals empty
// data, and an event is compared as the JSON value it is (the writer
// compacts it and escapes <, > and & as \u003c…, which reads the same).
func sameFrames(a, b []StreamFrame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := norm(a[i]), norm(b[i])
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func norm(f StreamFrame) StreamFrame {
	if len(f.Data) == 0 {
		f.Data = nil
	}
	if len(f.Event) > 0 {
		f.Event = canonicalJSON(f.Event)
	} else {
		f.Event = nil
	}
	if f.Error != nil && len(f.Error.Details) == 0 {
		// Written with omitempty: {} and none read back alike.
		e := *f.Error
		e.Details = nil
		f.Error = &e
	}
	return f
}

// canonicalJSON is b decoded and encoded again (numbers kept as
// written), so two spellings of one value compare equal; b as it is when
// it does not decode.
func canonicalJSON(b []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

// TestVolumeStreamRoundTrip: a volume upload and its answer, as the
// writer puts them on the wire with data raw and as base64, read back
// frame for frame, and ReadUpload hands on the chunks before EOF.
func TestVolumeStreamRoundTrip(t *testing.T) {
	upload, answer := uploadSeed()
	for _, raw := range []bool{false, true} {
		for _, frames := range [][]StreamFrame{upload, answer} {
			got, err := readFrames(writeFrames(t, frames, raw))
			if err != nil || !sameFrames(got, frames) {
				t.Fatalf("raw %v: read %+v, %v; want %+v", raw, got, err, frames)
			}
		}
		var chunks [][]byte
		if err := ReadUpload(frameConn{s: &wireStream{in: writeFrames(t, upload, raw)}}, func(b []byte) error {
			chunks = append(chunks, b)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(chunks) != 3 || !bytes.Equal(chunks[2], []byte("tail")) {
			t.Fatalf("raw %v: chunks %q", raw, chunks)
		}
	}
	// Cut before EOF: ErrUploadCut, the chunks so far handed on.
	wire := writeFrames(t, upload[:2], true)
	n := 0
	err := ReadUpload(frameConn{s: &wireStream{in: wire}}, func([]byte) error { n++; return nil })
	if !errors.Is(err, ErrUploadCut) || n != 2 {
		t.Fatalf("cut upload: %v after %d chunks, want ErrUploadCut after 2", err, n)
	}
	// A chunk the receiver refuses ends the upload with its error.
	stop := errors.New("plugin ended the stream")
	wire = writeFrames(t, upload, false)
	if err := ReadUpload(frameConn{s: &wireStream{in: wire}}, func([]byte) error { return stop }); err != stop {
		t.Fatalf("refused chunk: %v, want %v", err, stop)
	}
}
