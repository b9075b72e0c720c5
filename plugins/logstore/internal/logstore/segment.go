package logstore

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
)

// Record is one stored line.
type Record struct {
	TimeNano int64
	Stream   byte // streamStdout or streamStderr
	Line     []byte
}

const (
	streamStdout byte = 1
	streamStderr byte = 2
	recHeader         = 8 // len + crc
	bodyHeader        = 9 // time + stream
)

func streamByte(s string) byte {
	if s == "stderr" {
		return streamStderr
	}
	return streamStdout
}

func streamName(b byte) string {
	if b == streamStderr {
		return "stderr"
	}
	return "stdout"
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// appendRecord encodes r onto dst.
func appendRecord(dst []byte, r Record) []byte {
	n := bodyHeader + len(r.Line)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	crcAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	body := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.TimeNano))
	dst = append(dst, r.Stream)
	dst = append(dst, r.Line...)
	binary.BigEndian.PutUint32(dst[crcAt:], crc32.Checksum(dst[body:], crcTable))
	return dst
}

// maxRecord bounds a record body a reader accepts.
const maxRecord = bodyHeader + 1<<20

// readSegment calls fn for each record of the segment at path in order,
// until fn returns false. It stops quietly at a torn record.
func readSegment(path string, fn func(Record) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var hdr [recHeader]byte
	var body []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil // EOF or a header cut short
		}
		n := int(binary.BigEndian.Uint32(hdr[:4]))
		if n < bodyHeader || n > maxRecord {
			return nil
		}
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return nil
		}
		if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(hdr[4:]) {
			return nil
		}
		rec := Record{TimeNano: int64(binary.BigEndian.Uint64(body)), Stream: body[8], Line: body[bodyHeader:]}
		if !fn(rec) {
			return nil
		}
	}
}
